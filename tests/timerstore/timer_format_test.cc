// Format tests: TimerLog units and segments, TimerWheel file, checkpoint, recall handle,
// FineScheduler. Corruption list per STYLE.md: bad length, CRC mismatch, truncated tail at every
// byte, reopen for append.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include <string>
#include <vector>

#include "common/coding.h"
#include "common/file.h"
#include "test_util.h"
#include "timerstore/fine_scheduler.h"
#include "timerstore/recall_handle.h"
#include "timerstore/timer_checkpoint.h"
#include "timerstore/timer_log.h"
#include "timerstore/timer_wheel.h"

namespace tokimq {
namespace {

constexpr TimerLogPosition Pos(int64_t v) { return TimerLogPosition(v); }

TimerUnit MakeUnit(int64_t i) {
  TimerUnit u;
  u.flags = kUnitNormal;
  u.prev_pos = Pos(i == 0 ? -1 : (i - 1) * static_cast<int64_t>(kTimerUnitSize));
  u.write_ms = 1'700'000'000'000 + i;
  u.deliver_ms = 1'700'000'100'000 + i * 7;
  u.slot_tick = 1'700'000'100 + i;
  u.physical_offset = PhysicalOffset(4096 * i);
  u.ref = -1;
  u.msg_size = 180;
  u.topic_hash = 0xDEADBEEF;
  u.roll_count = static_cast<uint32_t>(i % 3);
  return u;
}

void ExpectSameUnit(const TimerUnit& a, const TimerUnit& b) {
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.prev_pos, b.prev_pos);
  EXPECT_EQ(a.write_ms, b.write_ms);
  EXPECT_EQ(a.deliver_ms, b.deliver_ms);
  EXPECT_EQ(a.slot_tick, b.slot_tick);
  EXPECT_EQ(a.physical_offset, b.physical_offset);
  EXPECT_EQ(a.ref, b.ref);
  EXPECT_EQ(a.msg_size, b.msg_size);
  EXPECT_EQ(a.topic_hash, b.topic_hash);
  EXPECT_EQ(a.roll_count, b.roll_count);
}

class TimerLogTest : public ::testing::Test {
 protected:
  std::string dir() const { return tmp_.Join("timerlog"); }
  // 4 units per segment.
  absl::StatusOr<std::unique_ptr<TimerLog>> OpenLog(int64_t validate_from = 0) {
    return TimerLog::Open(FileSystem::Default(), dir(), 4 * kTimerUnitSize, Pos(validate_from));
  }
  void Fill(int n) {
    auto log = OpenLog();
    ASSERT_TRUE(log.ok()) << log.status();
    for (int i = 0; i < n; ++i) ASSERT_TRUE((*log)->Append(MakeUnit(i)).ok());
    ASSERT_TRUE((*log)->Flush().ok());
  }
  std::string SegPath(int64_t base) const {
    char name[32];
    std::snprintf(name, sizeof(name), "%020lld", static_cast<long long>(base));
    return dir() + "/" + name;
  }
  testing::TempDir tmp_;
};

TEST_F(TimerLogTest, UnitRoundTripsAndIsFixedSize) {
  char buf[kTimerUnitSize];
  TimerUnit u = MakeUnit(5);
  u.deliver_ms = int64_t{1} << 62;  // full 64-bit deliver time
  EncodeTimerUnit(u, buf);
  EXPECT_EQ(DecodeFixed32(buf), kTimerUnitSize);
  TimerUnit v;
  ASSERT_TRUE(DecodeTimerUnit(buf, &v).ok());
  ExpectSameUnit(u, v);
}

TEST_F(TimerLogTest, BadLengthIsDataLoss) {
  char buf[kTimerUnitSize];
  EncodeTimerUnit(MakeUnit(1), buf);
  EncodeFixed32(buf, 71);
  TimerUnit v;
  EXPECT_EQ(DecodeTimerUnit(buf, &v).code(), absl::StatusCode::kDataLoss);
}

TEST_F(TimerLogTest, EveryFlippedByteIsCaughtByCrc) {
  char buf[kTimerUnitSize];
  EncodeTimerUnit(MakeUnit(1), buf);
  for (size_t i = 0; i < kTimerUnitSize; ++i) {
    char copy[kTimerUnitSize];
    std::copy_n(buf, kTimerUnitSize, copy);
    copy[i] ^= 0x10;
    TimerUnit v;
    EXPECT_EQ(DecodeTimerUnit(copy, &v).code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
}

TEST_F(TimerLogTest, AppendsAcrossSegmentsAndReadsBack) {
  Fill(10);
  auto log = OpenLog();
  ASSERT_TRUE(log.ok());
  EXPECT_EQ((*log)->WritePos(), Pos(10 * static_cast<int64_t>(kTimerUnitSize)));
  for (int i = 0; i < 10; ++i) {
    auto u = (*log)->Read(Pos(i * static_cast<int64_t>(kTimerUnitSize)));
    ASSERT_TRUE(u.ok()) << u.status();
    ExpectSameUnit(*u, MakeUnit(i));
  }
  EXPECT_TRUE(FileSystem::Default()->Exists(SegPath(8 * kTimerUnitSize)));
  EXPECT_EQ((*log)->Read(Pos(10 * kTimerUnitSize)).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*log)->Read(Pos(5)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TimerLogTest, BufferedUnitsAreReadableBeforeFlush) {
  auto log = OpenLog();
  ASSERT_TRUE(log.ok());
  auto pos = (*log)->Append(MakeUnit(0));
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ((*log)->FlushedPos(), Pos(0));
  ASSERT_TRUE((*log)->Read(*pos).ok());
}

TEST_F(TimerLogTest, TruncatedTailAtEveryByteIsCutToLastWholeUnit) {
  const int kUnits = 6;  // segment 0 full, segment 1 has 2 units
  for (size_t cut = 0; cut <= 2 * kTimerUnitSize; ++cut) {
    std::filesystem::remove_all(dir());
    Fill(kUnits);
    uint64_t seg1_size = 2 * kTimerUnitSize - cut;
    std::filesystem::resize_file(SegPath(4 * kTimerUnitSize), seg1_size);
    auto log = OpenLog();
    ASSERT_TRUE(log.ok()) << log.status();
    int64_t whole = 4 + static_cast<int64_t>(seg1_size / kTimerUnitSize);
    EXPECT_EQ((*log)->WritePos(), Pos(whole * static_cast<int64_t>(kTimerUnitSize)))
        << "cut " << cut;
    // Reopen for append: the next unit lands right after the last whole one.
    auto pos = (*log)->Append(MakeUnit(whole));
    ASSERT_TRUE(pos.ok());
    EXPECT_EQ(*pos, Pos(whole * static_cast<int64_t>(kTimerUnitSize)));
    ASSERT_TRUE((*log)->Flush().ok());
    log->reset();
    auto again = OpenLog();
    ASSERT_TRUE(again.ok());
    ExpectSameUnit(*(*again)->Read(*pos), MakeUnit(whole));
  }
}

TEST_F(TimerLogTest, CrcMismatchInLastUnitIsTruncated) {
  Fill(6);
  {
    auto f = FileSystem::Default()->Open(SegPath(4 * kTimerUnitSize), OpenMode::kReadWrite);
    ASSERT_TRUE((*f)->PWrite(kTimerUnitSize + 20, "X").ok());
  }
  auto log = OpenLog();
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ((*log)->WritePos(), Pos(5 * static_cast<int64_t>(kTimerUnitSize)));
  EXPECT_EQ((*log)->truncated_bytes(), static_cast<int64_t>(kTimerUnitSize));
}

TEST_F(TimerLogTest, BadUnitFollowedByGoodOneRefusesToOpenNamingFileAndOffset) {
  Fill(6);
  {
    auto f = FileSystem::Default()->Open(SegPath(0), OpenMode::kReadWrite);
    ASSERT_TRUE((*f)->PWrite(2 * kTimerUnitSize + 3, "XYZ").ok());
  }
  auto log = OpenLog();
  ASSERT_EQ(log.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(log.status().message().find(SegPath(0)), std::string::npos);
  EXPECT_NE(log.status().message().find("offset 144"), std::string::npos);
  // Units before validate_from are trusted at open (checked on read instead).
  auto trusted = OpenLog(3 * kTimerUnitSize);
  ASSERT_TRUE(trusted.ok());
  EXPECT_EQ((*trusted)->Read(Pos(2 * kTimerUnitSize)).status().code(), absl::StatusCode::kDataLoss);
}

class TimerWheelTest : public ::testing::Test {
 protected:
  std::string path() const { return tmp_.Join("timerwheel"); }
  testing::TempDir tmp_;
};

TEST_F(TimerWheelTest, LinkBuildsChainAndOldLapReadsEmpty) {
  auto w = TimerWheel::Open(FileSystem::Default(), path(), 1000, 16);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->Link(5, Pos(0)), Pos(-1));
  EXPECT_EQ((*w)->Link(5, Pos(72)), Pos(0));
  TimerSlot s = (*w)->Get(5);
  EXPECT_EQ(s.first_pos, Pos(0));
  EXPECT_EQ(s.last_pos, Pos(72));
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ((*w)->Get(21).count, 0u);  // same index, other lap
  EXPECT_EQ((*w)->Link(21, Pos(144)), Pos(-1));   // new lap replaces
  EXPECT_EQ((*w)->Get(5).count, 0u);
}

TEST_F(TimerWheelTest, PersistsAndReloads) {
  {
    auto w = TimerWheel::Open(FileSystem::Default(), path(), 100, 64);
    ASSERT_TRUE(w.ok());
    (*w)->Link(0, Pos(0));
    (*w)->Link(63, Pos(72));
    (*w)->Link(63, Pos(144));
    ASSERT_TRUE((*w)->Flush().ok());
  }
  auto w = TimerWheel::Open(FileSystem::Default(), path(), 100, 64);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->Get(0).last_pos, Pos(0));
  EXPECT_EQ((*w)->Get(63).count, 2u);
  EXPECT_EQ((*w)->Get(63).last_pos, Pos(144));
  EXPECT_EQ((*w)->corrupt_slots(), 0);
}

TEST_F(TimerWheelTest, OtherPrecisionOrSizeIsRefused) {
  ASSERT_TRUE(TimerWheel::Open(FileSystem::Default(), path(), 100, 64).ok());
  EXPECT_EQ(TimerWheel::Open(FileSystem::Default(), path(), 1000, 64).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(TimerWheel::Open(FileSystem::Default(), path(), 100, 32).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(TimerWheelTest, BadSlotCrcIsCountedAndReadsEmpty) {
  {
    auto w = TimerWheel::Open(FileSystem::Default(), path(), 100, 8);
    (*w)->Link(3, Pos(72));
    ASSERT_TRUE((*w)->Flush().ok());
  }
  {
    auto f = FileSystem::Default()->Open(path(), OpenMode::kReadWrite);
    ASSERT_TRUE((*f)->PWrite(TimerWheel::kHeaderSize + 3 * TimerWheel::kSlotSize + 9, "Q").ok());
  }
  auto w = TimerWheel::Open(FileSystem::Default(), path(), 100, 8);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->corrupt_slots(), 1);
  EXPECT_EQ((*w)->Get(3).count, 0u);
}

// fuzz/timer_wheel found the stored "+1" computed on int64_t: a slot record with a valid CRC
// whose stored tick is 2^63 overflowed when decoded (and tick INT64_MAX when encoded).
TEST(TimerSlotTest, ExtremeFieldValuesRoundTripWithoutOverflow) {
  char rec[TimerWheel::kSlotSize];
  const TimerSlot far{INT64_MAX, Pos(INT64_MAX), Pos(INT64_MIN), 7};
  EncodeTimerSlot(far, rec);
  EXPECT_EQ(DecodeFixed64(rec), uint64_t{1} << 63);  // stored tick = tick + 1, wrapped
  TimerSlot back;
  ASSERT_TRUE(DecodeTimerSlot(rec, &back));
  EXPECT_EQ(back.tick, INT64_MAX);
  EXPECT_EQ(back.first_pos, Pos(INT64_MAX));
  EXPECT_EQ(back.last_pos, Pos(INT64_MIN));
  EXPECT_EQ(back.count, 7u);
}

// fuzz/timer_wheel: a slot with negative fields and count 0, other than the default one, was
// encoded with CRC 0 over non-zero bytes and failed its own CRC when decoded.
TEST(TimerSlotTest, OnlyTheDefaultSlotIsStoredAsZeros) {
  char rec[TimerWheel::kSlotSize];
  EncodeTimerSlot(TimerSlot{}, rec);
  EXPECT_TRUE(std::all_of(rec, rec + sizeof(rec), [](char c) { return c == 0; }));
  const TimerSlot odd{-5, Pos(-1), Pos(-1), 0};
  EncodeTimerSlot(odd, rec);
  TimerSlot back;
  ASSERT_TRUE(DecodeTimerSlot(rec, &back));
  EXPECT_EQ(back.tick, -5);
  EXPECT_EQ(back.first_pos, Pos(-1));
  EXPECT_EQ(back.count, 0u);
}

TEST_F(TimerWheelTest, BadHeaderIsDataLoss) {
  ASSERT_TRUE(TimerWheel::Open(FileSystem::Default(), path(), 100, 8).ok());
  {
    auto f = FileSystem::Default()->Open(path(), OpenMode::kReadWrite);
    ASSERT_TRUE((*f)->PWrite(9, "Z").ok());
  }
  EXPECT_EQ(TimerWheel::Open(FileSystem::Default(), path(), 100, 8).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(TimerCheckpointTest, RoundTripsAndRejectsCorruption) {
  TimerCheckpointData c;
  c.precision_ms = 100;
  c.read_tick = 17'000'000'123;
  c.timerlog_flush_pos = Pos(7200);
  c.timerlog_scan_from = Pos(7128);
  c.enqueue_queue_offset = QueueOffset(99);
  c.last_enqueued_physical_offset = PhysicalOffset(123456);
  c.commitlog_scan_from = PhysicalOffset(4096);
  c.pending = 42;
  c.pins = {{0, 3}, {5, 39}};
  c.recalled = {{PhysicalOffset(800), 1'700'000'000'500}};
  std::string enc = c.Encode();
  auto d = TimerCheckpointData::Decode(enc);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->read_tick, c.read_tick);
  EXPECT_EQ(d->pending, 42);
  EXPECT_EQ(d->pins, c.pins);
  ASSERT_EQ(d->recalled.size(), 1u);
  EXPECT_EQ(d->recalled[0].deliver_ms, 1'700'000'000'500);
  for (size_t i = 0; i < enc.size(); ++i) {
    std::string bad = enc;
    bad[i] ^= 0x01;
    EXPECT_FALSE(TimerCheckpointData::Decode(bad).ok()) << "byte " << i;
  }
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_EQ(TimerCheckpointData::Decode(enc.substr(0, n)).status().code(),
              absl::StatusCode::kDataLoss);
  }
  std::string huge = enc;
  EncodeFixed32(huge.data() + 8, 0xFFFFFFF0u);  // absurd length: no allocation, just refused
  EXPECT_EQ(TimerCheckpointData::Decode(huge).status().code(), absl::StatusCode::kDataLoss);
  testing::TempDir tmp;
  ASSERT_TRUE(StoreTimerCheckpoint(FileSystem::Default(), tmp.Join("ck"), c).ok());
  auto loaded = LoadTimerCheckpoint(FileSystem::Default(), tmp.Join("ck"));
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->enqueue_queue_offset, QueueOffset(99));
  EXPECT_EQ(LoadTimerCheckpoint(FileSystem::Default(), tmp.Join("nope")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RecallHandleTest, PrintableRoundTripAndErrors) {
  RecallHandle h{PhysicalOffset(123456789), 1'700'000'123'456, 0xABCDEF01};
  std::string s = h.Encode();
  EXPECT_EQ(s.size(), 50u);
  EXPECT_EQ(s.find_first_not_of("0123456789abcdef"), std::string::npos);
  auto d = RecallHandle::Decode(s);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->physical_offset, h.physical_offset);
  EXPECT_EQ(d->deliver_ms, h.deliver_ms);
  EXPECT_EQ(d->id_crc, h.id_crc);
  EXPECT_EQ(RecallHandle::Decode("xyz").status().code(), absl::StatusCode::kInvalidArgument);
  std::string bad = s;
  bad[10] = bad[10] == '0' ? '1' : '0';
  EXPECT_EQ(RecallHandle::Decode(bad).status().code(), absl::StatusCode::kNotFound);
}

TEST(FineSchedulerTest, ReleasesInDeliverOrderNeverEarly) {
  FineScheduler f;
  for (int i = 0; i < 10; ++i) {
    ScheduledUnit su;
    su.pos = Pos(i * 72);
    su.unit.deliver_ms = 1000 + (9 - i);
    su.unit.physical_offset = PhysicalOffset(i);
    f.Add(su);
  }
  std::vector<ScheduledUnit> out;
  EXPECT_EQ(f.PopDue(999, 100, &out), 0u);
  EXPECT_EQ(f.NextDueMs(), 1000);
  EXPECT_EQ(f.PopDue(1004, 100, &out), 5u);
  EXPECT_TRUE(f.Remove(PhysicalOffset(0)));  // deliver 1009
  EXPECT_EQ(f.PopDue(2000, 100, &out), 4u);
  ASSERT_EQ(out.size(), 9u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].unit.deliver_ms, 1000 + int64_t(i));
}

// Runs (whole walked slots, pre-sorted) merge with single units and with each other: PopDue
// still gives deliver order (ties by TimerLog position), never early, and Remove and size()
// see units in runs.
TEST(FineSchedulerTest, RunsMergeWithSingleUnitsInOrder) {
  auto unit = [](int64_t pos, int64_t deliver) {
    ScheduledUnit su;
    su.pos = Pos(pos);
    su.unit.deliver_ms = deliver;
    su.unit.physical_offset = PhysicalOffset(pos * 10);
    return su;
  };
  FineScheduler f;
  // Run A: 1000, 1002, 1002 (pos 5 before pos 9), 1010. Run B: 1001, 1002 (pos 7), 1003.
  std::vector<ScheduledUnit> a = {unit(5, 1002), unit(1, 1000), unit(9, 1002), unit(3, 1010)};
  std::sort(a.begin(), a.end(), FineScheduler::RunOrder);
  f.AddRun(std::move(a));
  f.AddRun({unit(2, 1001), unit(7, 1002), unit(8, 1003)});
  f.AddRun({});  // nothing
  f.Add(unit(4, 999));
  f.Add(unit(6, 1002));
  EXPECT_EQ(f.size(), 9u);
  EXPECT_EQ(f.NextDueMs(), 999);
  EXPECT_TRUE(f.Remove(PhysicalOffset(80)));  // pos 8 (deliver 1003), from run B
  EXPECT_FALSE(f.Remove(PhysicalOffset(80)));
  EXPECT_EQ(f.size(), 8u);
  std::vector<ScheduledUnit> out;
  EXPECT_EQ(f.PopDue(998, 100, &out), 0u);
  EXPECT_EQ(f.PopDue(1002, 3, &out), 3u);  // max_count respected
  EXPECT_EQ(f.PopDue(1002, 100, &out), 4u);
  EXPECT_EQ(f.NextDueMs(), 1010);
  EXPECT_EQ(f.PopDue(1009, 100, &out), 0u);
  EXPECT_EQ(f.PopDue(5000, 100, &out), 1u);
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(f.NextDueMs(), INT64_MAX);
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const ScheduledUnit& su : out) got.emplace_back(su.unit.deliver_ms, su.pos.value());
  const std::vector<std::pair<int64_t, int64_t>> want = {
      {999, 4}, {1000, 1}, {1001, 2}, {1002, 5}, {1002, 6}, {1002, 7}, {1002, 9}, {1010, 3}};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace tokimq
