// DiskWatermark: producers refused below the free-bytes / usage watermark, from a cached
// statvfs refreshed by time or by bytes appended; the full state after an ENOSPC.
#include "disk_watermark.h"

#include <gtest/gtest.h>

#include "common/clock.h"

namespace tokimq::broker {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Reports a settable free / total space and counts the statvfs calls; files are not used.
class SpaceFileSystem final : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<File>> Open(const std::string&, OpenMode) override {
    return absl::UnimplementedError("no files");
  }
  absl::Status Rename(const std::string&, const std::string&) override { return {}; }
  absl::Status Remove(const std::string&) override { return {}; }
  absl::Status CreateDirs(const std::string&) override { return {}; }
  absl::Status SyncDir(const std::string&) override { return {}; }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string&) override {
    return std::vector<std::string>{};
  }
  bool Exists(const std::string&) override { return true; }
  absl::StatusOr<uint64_t> FreeSpace(const std::string&) override { return free; }
  absl::StatusOr<Space> DiskSpace(const std::string&) override {
    ++calls;
    return Space{free, total};
  }
  uint64_t free = 0;
  uint64_t total = 0;
  int calls = 0;
};

class DiskWatermarkTest : public ::testing::Test {
 protected:
  std::unique_ptr<DiskWatermark> Make(uint64_t min_free, double ratio) {
    DiskWatermarkOptions o;
    o.path = "/data";
    o.min_free_bytes = min_free;
    o.max_used_ratio = ratio;
    o.refresh_interval_ms = 1000;
    o.refresh_bytes = 64 * kMiB;
    return std::make_unique<DiskWatermark>(&fs_, &clock_, o, [this] { return appended_; });
  }
  SpaceFileSystem fs_;
  ManualClock clock_{1'000'000};
  int64_t appended_ = 0;
};

TEST_F(DiskWatermarkTest, RefusesProducersBelowFreeBytesAndAdmitsAgainAtTheNextCheck) {
  fs_.total = 1000 * kMiB;
  fs_.free = 500 * kMiB;
  auto wm = Make(100 * kMiB, 1.0);
  EXPECT_TRUE(wm->AdmitProducer(1000).ok());
  fs_.free = 50 * kMiB;  // a filler file appears
  EXPECT_TRUE(wm->AdmitProducer(1000).ok()) << "cached until the next check";
  clock_.AdvanceMs(1000);
  absl::Status s = wm->AdmitProducer(1000);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("disk usage above watermark"), std::string::npos) << s;
  EXPECT_EQ(wm->snapshot().state, DiskState::kAboveWatermark);
  EXPECT_EQ(wm->snapshot().free_bytes, 50 * kMiB);
  EXPECT_EQ(wm->snapshot().threshold_bytes, 100 * kMiB);
  EXPECT_FALSE(wm->AdmitProducer(1000).ok());
  EXPECT_EQ(wm->snapshot().sends_refused, 2);
  fs_.free = 400 * kMiB;  // freed
  clock_.AdvanceMs(1000);
  EXPECT_TRUE(wm->AdmitProducer(1000).ok());
  EXPECT_EQ(wm->snapshot().state, DiskState::kOk);
  EXPECT_EQ(wm->snapshot().sends_refused, 2);
}

TEST_F(DiskWatermarkTest, UsageRatioSetsTheThresholdFromTheDiskSize) {
  fs_.total = 1000 * kMiB;
  fs_.free = 120 * kMiB;  // 88 % used
  auto wm = Make(0, 0.9);
  EXPECT_TRUE(wm->AdmitProducer(kMiB).ok());
  EXPECT_EQ(wm->snapshot().threshold_bytes, 100 * kMiB);
  // 120 - 25 MiB would leave 95 MiB free: over 90 % used.
  EXPECT_EQ(wm->AdmitProducer(25 * kMiB).code(), absl::StatusCode::kResourceExhausted);
  // The larger of the two terms applies.
  auto both = Make(200 * kMiB, 0.9);
  EXPECT_EQ(both->AdmitProducer(1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(both->snapshot().threshold_bytes, 200 * kMiB);
}

TEST_F(DiskWatermarkTest, ChecksTheDiskOncePerIntervalNotPerSend) {
  fs_.total = 1000 * kMiB;
  fs_.free = 500 * kMiB;
  auto wm = Make(100 * kMiB, 0.9);
  for (int i = 0; i < 10'000; ++i) ASSERT_TRUE(wm->AdmitProducer(100).ok());
  EXPECT_EQ(fs_.calls, 1);
  clock_.AdvanceMs(999);
  ASSERT_TRUE(wm->AdmitProducer(100).ok());
  EXPECT_EQ(fs_.calls, 1);
  clock_.AdvanceMs(1);
  ASSERT_TRUE(wm->AdmitProducer(100).ok());
  EXPECT_EQ(fs_.calls, 2);
}

TEST_F(DiskWatermarkTest, BytesAppendedSinceTheLastCheckCountAsUsedAndTriggerACheck) {
  fs_.total = 1000 * kMiB;
  fs_.free = 160 * kMiB;
  auto wm = Make(100 * kMiB, 1.0);
  ASSERT_TRUE(wm->AdmitProducer(1).ok());
  EXPECT_EQ(fs_.calls, 1);
  appended_ = 50 * kMiB;  // the CommitLog grew; the disk is not asked yet
  fs_.free = 110 * kMiB;
  EXPECT_EQ(wm->AdmitProducer(20 * kMiB).code(), absl::StatusCode::kResourceExhausted)
      << "160 - 50 - 20 MiB is below 100 MiB";
  EXPECT_EQ(fs_.calls, 1);
  appended_ = 64 * kMiB;  // refresh_bytes reached: asked again
  fs_.free = 300 * kMiB;
  EXPECT_TRUE(wm->AdmitProducer(20 * kMiB).ok());
  EXPECT_EQ(fs_.calls, 2);
}

TEST_F(DiskWatermarkTest, NoSpaceRefusesProducersUntilACheckFindsRoom) {
  fs_.total = 1000 * kMiB;
  fs_.free = 500 * kMiB;
  auto wm = Make(0, 1.0);  // watermark off: only a full disk refuses
  ASSERT_TRUE(wm->AdmitProducer(1).ok());
  wm->NoteNoSpace();
  EXPECT_EQ(wm->snapshot().state, DiskState::kFull);
  EXPECT_EQ(wm->AdmitProducer(1).code(), absl::StatusCode::kResourceExhausted);
  fs_.free = 1 * kMiB;  // a few pages: still full (no flapping per write)
  clock_.AdvanceMs(1000);
  EXPECT_EQ(wm->AdmitProducer(1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(wm->snapshot().state, DiskState::kFull);
  fs_.free = 300 * kMiB;
  clock_.AdvanceMs(1000);
  EXPECT_TRUE(wm->AdmitProducer(1).ok());
  EXPECT_EQ(wm->snapshot().state, DiskState::kOk);
  EXPECT_EQ(wm->snapshot().no_space_errors, 1);
  EXPECT_EQ(wm->snapshot().sends_refused, 2);
}

// Group-state writes (RocksDB) are refused before the disk is full: RocksDB's WAL writer aborts
// the process on a write that runs out of space (found with acks on a disk another process
// filled below the producer watermark).
TEST_F(DiskWatermarkTest, OwnWritesAreRefusedBelowTheFloorAndCountUntilTheNextCheck) {
  fs_.total = 100 * kMiB;
  fs_.free = 6 * kMiB;  // below the producer watermark (10 MiB), above the 4 MiB floor
  auto wm = Make(0, 0.9);
  EXPECT_EQ(wm->AdmitProducer(1000).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(wm->AdmitOwnWrite(512 * 1024).ok()) << "6 MiB - 0.5 MiB stays above 4 MiB";
  const int calls = fs_.calls;
  // The first write counts twice (WAL, then table file): 6 - 1 = 5 MiB estimated free, so a
  // second 0.5 MiB write still fits, a third does not, and the disk is asked before refusing.
  EXPECT_TRUE(wm->AdmitOwnWrite(512 * 1024).ok());
  fs_.free = 4 * kMiB + 100;  // what the disk really has now
  absl::Status s = wm->AdmitOwnWrite(512 * 1024);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("no room for group state"), absl::string_view::npos) << s;
  EXPECT_EQ(fs_.calls, calls + 1) << "asked the disk again before refusing";
  fs_.free = 20 * kMiB;  // space freed: seen by the next write at once, no interval to wait
  EXPECT_TRUE(wm->AdmitOwnWrite(512 * 1024).ok());
  EXPECT_EQ(fs_.calls, calls + 2);
}

}  // namespace
}  // namespace tokimq::broker
