// OrderLog (the order-timeout example's durable store): round trip, group commit, the format's
// corruption list (checksum mismatch, truncated tail at every byte, bad record followed by good
// ones, bad header), reopen for append, sticky sync failure, and the worked example of
// docs/formats/order-log.md.
#include "order_timeout/order_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/fault_injection_fs.h"
#include "test_util.h"

namespace tokimq::order_timeout {
namespace {

RunConfig TestConfig() {
  RunConfig c;
  c.run_id = 0x0102030405060708ull;
  c.orders = 100;
  c.timeout_ms = 5000;
  c.paid_ppm = 700'000;
  c.seed = 42;
  return c;
}

std::vector<OrderRecord> ReadAll(FileSystem* fs, const std::string& path, absl::Status* status) {
  std::vector<OrderRecord> out;
  auto log = OrderLog::Open(fs, path, [&](const OrderRecord& r) { out.push_back(r); });
  *status = log.status();
  return out;
}

class OrderLogTest : public ::testing::Test {
 protected:
  std::string path() const { return dir_.Join("state/orders.log"); }
  uint64_t FileSize() const { return std::filesystem::file_size(path()); }
  void WriteThreeRecords() {
    auto log = OrderLog::Create(FileSystem::Default(), path(), TestConfig());
    ASSERT_TRUE(log.ok()) << log.status();
    (*log)->Append({OrderEvent::kCreated, 1, 5000});
    (*log)->Append({OrderEvent::kPaid, 1, 1200});
    uint64_t seq = (*log)->Append({OrderEvent::kCreated, 2, 5001});
    ASSERT_TRUE((*log)->Sync(seq).ok());
  }
  void FlipByte(uint64_t offset) {
    std::fstream f(path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }

  testing::TempDir dir_;
};

TEST_F(OrderLogTest, ReopenReplaysRecordsInOrderWithTheRunConfig) {
  WriteThreeRecords();
  std::vector<OrderRecord> seen;
  auto log = OrderLog::Open(FileSystem::Default(), path(),
                            [&](const OrderRecord& r) { seen.push_back(r); });
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ((*log)->config().run_id, 0x0102030405060708ull);
  EXPECT_EQ((*log)->config().orders, 100u);
  EXPECT_EQ((*log)->config().timeout_ms, 5000);
  EXPECT_EQ((*log)->config().paid_ppm, 700'000u);
  EXPECT_EQ((*log)->config().seed, 42u);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].event, OrderEvent::kCreated);
  EXPECT_EQ(seen[1].event, OrderEvent::kPaid);
  EXPECT_EQ(seen[1].order_id, 1u);
  EXPECT_EQ(seen[1].time_ms, 1200);
  EXPECT_EQ(seen[2].order_id, 2u);
  EXPECT_EQ(seen[2].time_ms, 5001);
}

TEST_F(OrderLogTest, AppendWritesNothingUntilSync) {
  auto log = OrderLog::Create(FileSystem::Default(), path(), TestConfig());
  ASSERT_TRUE(log.ok());
  uint64_t seq = (*log)->Append({OrderEvent::kCreated, 3, 9});
  EXPECT_EQ(seq, 1u);
  EXPECT_EQ(FileSize(), kOrderLogHeaderSize);
  EXPECT_EQ((*log)->durable_seq(), 0u);
  ASSERT_TRUE((*log)->Sync(seq).ok());
  EXPECT_EQ(FileSize(), kOrderLogHeaderSize + kOrderLogRecordSize);
  EXPECT_EQ((*log)->durable_seq(), 1u);
}

TEST_F(OrderLogTest, ConcurrentSyncersAllBecomeDurable) {
  auto log = OrderLog::Create(FileSystem::Default(), path(), RunConfig{1, 10'000, 1, 0, 0});
  ASSERT_TRUE(log.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 200; ++i) {
        uint64_t seq = (*log)->Append({OrderEvent::kCreated, t * 1000 + i, 1});
        ASSERT_TRUE((*log)->Sync(seq).ok());
        ASSERT_GE((*log)->durable_seq(), seq);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ((*log)->durable_seq(), 800u);
  EXPECT_LE((*log)->sync_count(), 800u);
  EXPECT_EQ(FileSize(), kOrderLogHeaderSize + 800 * kOrderLogRecordSize);
}

TEST_F(OrderLogTest, TruncatedTailAtEveryByteIsCutAndTheLogReopensForAppend) {
  WriteThreeRecords();
  const uint64_t full = FileSize();
  std::string original;
  {
    std::ifstream in(path(), std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (uint64_t cut = kOrderLogHeaderSize + 2 * kOrderLogRecordSize; cut < full; ++cut) {
    {
      std::ofstream out(path(), std::ios::binary | std::ios::trunc);
      out.write(original.data(), static_cast<std::streamsize>(cut));
    }
    absl::Status s;
    std::vector<OrderRecord> seen = ReadAll(FileSystem::Default(), path(), &s);
    ASSERT_TRUE(s.ok()) << "cut " << cut << ": " << s;
    ASSERT_EQ(seen.size(), 2u) << "cut " << cut;
    ASSERT_EQ(FileSize(), kOrderLogHeaderSize + 2 * kOrderLogRecordSize) << "cut " << cut;
  }
  {
    auto log = OrderLog::Open(FileSystem::Default(), path(), nullptr);
    ASSERT_TRUE(log.ok());
    uint64_t seq = (*log)->Append({OrderEvent::kCancelled, 2, 6000});
    EXPECT_EQ(seq, 3u);
    ASSERT_TRUE((*log)->Sync(seq).ok());
  }
  absl::Status s;
  std::vector<OrderRecord> seen = ReadAll(FileSystem::Default(), path(), &s);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].event, OrderEvent::kCancelled);
  EXPECT_EQ(seen[2].time_ms, 6000);
}

TEST_F(OrderLogTest, ChecksumMismatchInTheLastRecordIsATornTail) {
  WriteThreeRecords();
  FlipByte(kOrderLogHeaderSize + 2 * kOrderLogRecordSize + 10);
  absl::Status s;
  std::vector<OrderRecord> seen = ReadAll(FileSystem::Default(), path(), &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(FileSize(), kOrderLogHeaderSize + 2 * kOrderLogRecordSize);
}

TEST_F(OrderLogTest, BadRecordFollowedByAGoodOneIsDataLossNamingTheOffset) {
  WriteThreeRecords();
  FlipByte(kOrderLogHeaderSize + kOrderLogRecordSize + 17);
  absl::Status s;
  ReadAll(FileSystem::Default(), path(), &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("offset 80"), std::string::npos) << s;
  EXPECT_EQ(FileSize(), kOrderLogHeaderSize + 3 * kOrderLogRecordSize);  // left for inspection
}

TEST_F(OrderLogTest, OrderIdOutsideTheRunIsABadRecord) {
  auto log = OrderLog::Create(FileSystem::Default(), path(), TestConfig());
  ASSERT_TRUE(log.ok());
  (*log)->Append({OrderEvent::kCreated, 99, 1});
  ASSERT_TRUE((*log)->SyncAll().ok());
  (*log)->Append({OrderEvent::kCreated, 100, 1});  // orders = 100: ids 0..99
  ASSERT_TRUE((*log)->SyncAll().ok());
  log->reset();
  absl::Status s;
  std::vector<OrderRecord> seen = ReadAll(FileSystem::Default(), path(), &s);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(seen.size(), 1u);
}

TEST_F(OrderLogTest, BadHeaderIsDataLoss) {
  WriteThreeRecords();
  FlipByte(20);
  absl::Status s;
  ReadAll(FileSystem::Default(), path(), &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
}

TEST_F(OrderLogTest, CreateRefusesAnExistingLogAndOpenAMissingOne) {
  WriteThreeRecords();
  EXPECT_EQ(OrderLog::Create(FileSystem::Default(), path(), TestConfig()).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(OrderLog::Open(FileSystem::Default(), dir_.Join("nope.log"), nullptr).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(OrderLogTest, FailedSyncStaysFailedAndATornWriteIsCutOnReopen) {
  FaultInjectionFileSystem fs;
  auto log = OrderLog::Create(&fs, path(), TestConfig());
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->Sync((*log)->Append({OrderEvent::kCreated, 1, 5})).ok());
  fs.TearAfterBytes(30);  // the next write of two records stops inside the second
  (*log)->Append({OrderEvent::kCreated, 2, 5});
  uint64_t seq = (*log)->Append({OrderEvent::kCreated, 3, 5});
  EXPECT_FALSE((*log)->Sync(seq).ok());
  fs.ClearFaults();
  EXPECT_FALSE((*log)->Sync(seq).ok());
  EXPECT_FALSE((*log)->Sync((*log)->Append({OrderEvent::kCreated, 4, 5})).ok());
  log->reset();
  absl::Status s;
  std::vector<OrderRecord> seen = ReadAll(FileSystem::Default(), path(), &s);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(seen.size(), 2u);  // record 2 was written whole before the tear
  EXPECT_EQ(seen[1].order_id, 2u);
}

std::string Hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += d[c >> 4];
    hex += d[c & 15];
  }
  return hex;
}

TEST(OrderLogFormatTest, WorkedExampleMatchesTheFormatDocument) {
  std::string rec = OrderLog::EncodeRecord({OrderEvent::kPaid, 7, 1'700'000'000'123});
  ASSERT_EQ(rec.size(), kOrderLogRecordSize);
  EXPECT_EQ(Hex(rec), "be726dae" "03000000" "0700000000000000" "7b68e5cf8b010000");
  std::string header =
      OrderLog::EncodeHeader(RunConfig{0x0102030405060708ull, 100'000, 5000, 700'000, 42});
  ASSERT_EQ(header.size(), kOrderLogHeaderSize);
  EXPECT_EQ(Hex(header),
            "544b4f52444c4f47" "01000000" "60ae0a00" "0807060504030201" "a086010000000000"
            "8813000000000000" "2a00000000000000" "016a87da" "00000000");
}

}  // namespace
}  // namespace tokimq::order_timeout
