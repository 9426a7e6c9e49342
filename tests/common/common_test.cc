#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/fault_injection_fs.h"
#include "common/file.h"
#include "common/message_limits.h"
#include "common/metrics.h"
#include "test_util.h"

namespace tokimq {
namespace {

TEST(Crc32cTest, MatchesStandardCheckValue) {
  EXPECT_EQ(crc32c::Value("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c::Value("", 0), 0u);
}

TEST(Crc32cTest, ExtendEqualsWholeBuffer) {
  std::string a = "hello ", b = "world";
  EXPECT_EQ(crc32c::Extend(crc32c::Value(a), b.data(), b.size()), crc32c::Value(a + b));
}

TEST(CodingTest, FixedWidthIsLittleEndianAndRoundTrips) {
  std::string s;
  PutFixed32(&s, 0x01020304u);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0], 0x04);
  EXPECT_EQ(s[3], 0x01);
  PutFixed64(&s, 0xFFEEDDCCBBAA9988ull);
  PutFixed16(&s, 0xBEEF);
  Decoder d(s);
  uint32_t a;
  uint64_t b;
  uint16_t c;
  ASSERT_TRUE(d.GetFixed32(&a));
  ASSERT_TRUE(d.GetFixed64(&b));
  ASSERT_TRUE(d.GetFixed16(&c));
  EXPECT_EQ(a, 0x01020304u);
  EXPECT_EQ(b, 0xFFEEDDCCBBAA9988ull);
  EXPECT_EQ(c, 0xBEEF);
  EXPECT_EQ(d.remaining(), 0u);
}

TEST(CodingTest, LengthPrefixLongerThanInputIsRejected) {
  std::string s;
  PutFixed32(&s, 1000);  // claims 1000 bytes
  s += "abc";
  Decoder d(s);
  std::string_view out;
  EXPECT_FALSE(d.GetLengthPrefixed(&out));
  EXPECT_EQ(d.remaining(), 7u);  // nothing consumed
}

TEST(ManualClockTest, MovesOnlyWhenAdvanced) {
  ManualClock clock(5000);
  EXPECT_EQ(clock.NowMs(), 5000);
  clock.AdvanceMs(250);
  EXPECT_EQ(clock.NowMs(), 5250);
  clock.SetMs(100);  // backwards: ignored
  EXPECT_EQ(clock.NowMs(), 5250);
  clock.WaitUntilMs(5000, std::chrono::milliseconds(0));  // already past: returns
  EXPECT_TRUE(clock.IsManual());
}

TEST(SystemClockTest, WaitUntilAFarDeadlineWaitsOnlyTheTimeout) {
  // INT64_MAX means "nothing due": no ms -> us overflow (UBSan stops the test if there is; a
  // wrapped, negative wait would return at once instead of waiting the timeout).
  for (int64_t deadline : {INT64_MAX, INT64_MAX / 1000 + 1}) {
    const auto start = std::chrono::steady_clock::now();
    SystemClock::Default()->WaitUntilMs(deadline, std::chrono::milliseconds(20));
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, std::chrono::milliseconds(20)) << deadline;
    EXPECT_LT(waited, std::chrono::seconds(30)) << deadline;
  }
}

TEST(HistogramTest, PercentilesWithinBucketError) {
  Histogram h;
  for (int i = 1; i <= 1000; ++i) h.Record(i);
  EXPECT_EQ(h.Count(), 1000);
  EXPECT_EQ(h.Max(), 1000);
  int64_t p50 = h.Percentile(0.5);
  EXPECT_GE(p50, 500);
  EXPECT_LE(p50, 532);
  EXPECT_EQ(h.Percentile(1.0), 1000);
  h.Record(3);
  EXPECT_EQ(h.Percentile(0.0), 1);
}

TEST(HistogramTest, SnapshotListsNonEmptyBucketsWithTheirUpperBounds) {
  Histogram h;
  h.Record(3);
  h.Record(3);
  h.Record(70);    // 16 sub-buckets of 4 between 64 and 127: 68..71
  h.Record(1000);  // 32 wide between 512 and 1023: 992..1023
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.buckets, (std::vector<HistogramBucket>{{3, 2}, {71, 1}, {1023, 1}}));
  EXPECT_EQ(s.count, 4);
  EXPECT_EQ(s.max, 1000);
  EXPECT_EQ(Histogram::UpperBound(0), 0);
  EXPECT_EQ(Histogram::UpperBound(63), 63);
  EXPECT_EQ(Histogram::UpperBound(64), 67);
}

TEST(HistogramTest, SnapshotPercentilesEqualTheLiveHistogram) {
  Histogram h;
  for (int i = 1; i <= 1000; ++i) h.Record(i);
  HistogramSnapshot s = h.Snapshot();
  for (double q : {0.0, 0.25, 0.5, 0.9, 0.99, 1.0}) {
    EXPECT_EQ(s.Percentile(q), h.Percentile(q)) << "q=" << q;
  }
  EXPECT_EQ(HistogramSnapshot{}.Percentile(0.99), 0);
}

TEST(HistogramTest, DeltaHoldsOnlyWhatWasRecordedBetweenSnapshots) {
  Histogram h;
  for (int i = 0; i < 10; ++i) h.Record(5);
  h.Record(5000);
  HistogramSnapshot before = h.Snapshot();
  h.Record(5);
  h.Record(5);
  for (int i = 0; i < 3; ++i) h.Record(40);
  h.Record(900);  // 32 wide between 512 and 1023: 896..927
  auto d = HistogramSnapshot::Delta(before, h.Snapshot());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->buckets, (std::vector<HistogramBucket>{{5, 2}, {40, 3}, {927, 1}}));
  EXPECT_EQ(d->count, 6);
  // The window's max is the highest bucket's bound: the earlier 5000 does not leak in.
  EXPECT_EQ(d->max, 927);
  EXPECT_EQ(d->Percentile(0.5), 40);  // rank 3 of 6
  EXPECT_EQ(d->Percentile(0.99), 927);
}

TEST(HistogramTest, DeltaMaxIsCappedByTheLaterSnapshotsExactMax) {
  Histogram h;
  h.Record(10);
  HistogramSnapshot before = h.Snapshot();
  h.Record(900);
  auto d = HistogramSnapshot::Delta(before, h.Snapshot());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->max, 900);
  EXPECT_EQ(d->Percentile(1.0), 900);
  auto none = HistogramSnapshot::Delta(h.Snapshot(), h.Snapshot());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->buckets.empty());
  EXPECT_EQ(none->count, 0);
  EXPECT_EQ(none->max, 0);
}

TEST(HistogramTest, DeltaAcrossAResetIsRefused) {
  Histogram h;
  h.Record(7);
  h.Record(7);
  HistogramSnapshot before = h.Snapshot();
  h.Reset();
  h.Record(7);
  EXPECT_EQ(HistogramSnapshot::Delta(before, h.Snapshot()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  h.Reset();
  h.Record(8);  // bucket 7 vanished, bucket 8 appeared
  EXPECT_EQ(HistogramSnapshot::Delta(before, h.Snapshot()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  h.Reset();
  EXPECT_EQ(HistogramSnapshot::Delta(before, h.Snapshot()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GaugeTest, NeverGoesBelowZeroAndCountsUnderflow) {
  Gauge g;
  g.Add(2);
  g.Sub(3);
  EXPECT_EQ(g.Value(), 0);
  EXPECT_EQ(g.underflows(), 1);
}

TEST(PosixFileTest, ReadMappingSeesLaterAppendsAndIsOnePerFile) {
  tokimq::testing::TempDir dir;
  auto f = FileSystem::Default()->Open(dir.Join("seg"), OpenMode::kTruncate).value();
  ASSERT_TRUE(f->Append("first").ok());
  // Mapped for the size the file will reach, like a CommitLog segment.
  const char* m = f->MapForRead(1 << 16);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(std::string(m, 5), "first");
  ASSERT_TRUE(f->Append("+second").ok());
  EXPECT_EQ(std::string(m, 12), "first+second");  // one page cache: appends show at once
  ASSERT_TRUE(f->PWrite(0, "FIRST").ok());
  EXPECT_EQ(std::string(m, 5), "FIRST");
  EXPECT_EQ(f->MapForRead(1 << 12), m);        // smaller: the same mapping
  EXPECT_EQ(f->MapForRead(1 << 17), nullptr);  // larger than mapped: read with PRead
}

class FaultInjectionFsTest : public ::testing::Test {
 protected:
  tokimq::testing::TempDir dir_;
  FaultInjectionFileSystem fs_;
};

TEST_F(FaultInjectionFsTest, FilesAreNotMappedSoEveryReadSeesInjectedFaults) {
  auto f = fs_.Open(dir_.Join("f"), OpenMode::kReadWrite).value();
  ASSERT_TRUE(f->Append("data").ok());
  EXPECT_EQ(f->MapForRead(1 << 16), nullptr);
}

TEST_F(FaultInjectionFsTest, DropUnsyncedDataKeepsSyncedPrefix) {
  std::string path = dir_.Join("f");
  {
    auto f = fs_.Open(path, OpenMode::kReadWrite).value();
    ASSERT_TRUE(f->Append("durable").ok());
    ASSERT_TRUE(f->Sync().ok());
    ASSERT_TRUE(f->Append("-lost").ok());
    EXPECT_EQ(f->Size(), 12u);
  }
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  EXPECT_EQ(ReadWholeFile(&fs_, path).value(), "durable");
}

TEST_F(FaultInjectionFsTest, TornWriteKeepsPrefixAndFailsLaterWrites) {
  auto f = fs_.Open(dir_.Join("t"), OpenMode::kReadWrite).value();
  fs_.TearAfterBytes(3);
  EXPECT_FALSE(f->Append("abcdef").ok());
  EXPECT_EQ(f->Size(), 3u);
  EXPECT_FALSE(f->Append("x").ok());
  EXPECT_FALSE(f->Sync().ok());
}

TEST_F(FaultInjectionFsTest, NoSpaceWritesNothing) {
  auto f = fs_.Open(dir_.Join("n"), OpenMode::kReadWrite).value();
  fs_.SetNoSpace(true);
  absl::Status st = f->Append("abc");
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(f->Size(), 0u);
  EXPECT_EQ(fs_.FreeSpace(dir_.path()).value(), 0u);
}

TEST_F(FaultInjectionFsTest, FailedSyncIsReported) {
  auto f = fs_.Open(dir_.Join("s"), OpenMode::kReadWrite).value();
  ASSERT_TRUE(f->Append("abc").ok());
  fs_.SetFailSync(true);
  EXPECT_FALSE(f->Sync().ok());
  fs_.ClearFaults();
  EXPECT_TRUE(f->Sync().ok());
}

TEST(FileTest, WriteFileAtomicReplacesContent) {
  tokimq::testing::TempDir dir;
  FileSystem* fs = FileSystem::Default();
  std::string p = dir.Join("cp");
  ASSERT_TRUE(WriteFileAtomic(fs, p, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(fs, p, "two!").ok());
  EXPECT_EQ(ReadWholeFile(fs, p).value(), "two!");
  EXPECT_FALSE(fs->Exists(p + ".tmp"));
  EXPECT_EQ(ReadWholeFile(fs, dir.Join("missing")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tokimq

// ---- Message limits (common/message_limits.h) ----

namespace tokimq {
namespace {

TEST(MessageLimitsTest, EachLimitIsInclusiveAndNamedWhenExceeded) {
  std::map<std::string, std::string> none;
  HeaderLimit which = HeaderLimit::kNone;
  EXPECT_TRUE(CheckMessageHeaders(std::string(kMaxKeyBytes, 'k'), "", none, &which).ok());
  EXPECT_EQ(which, HeaderLimit::kNone);
  absl::Status s = CheckMessageHeaders(std::string(8'912'896, 'k'), "", none, &which);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(which, HeaderLimit::kKey);
  EXPECT_EQ(s.message(), "key of 8912896 bytes exceeds the limit of 16384 bytes");

  EXPECT_TRUE(CheckMessageHeaders("", std::string(kMaxTagBytes, 't'), none).ok());
  s = CheckMessageHeaders("", std::string(100'000, 't'), none, &which);
  EXPECT_EQ(which, HeaderLimit::kTag);
  EXPECT_EQ(s.message(), "tag of 100000 bytes exceeds the limit of 16384 bytes");

  std::map<std::string, std::string> props;
  props[std::string(kMaxPropertyNameBytes, 'n')] = std::string(kMaxPropertyValueBytes, 'v');
  EXPECT_TRUE(CheckMessageHeaders("", "", props).ok());
  props = {{std::string(kMaxPropertyNameBytes + 1, 'n'), "v"}};
  s = CheckMessageHeaders("", "", props, &which);
  EXPECT_EQ(which, HeaderLimit::kPropertyName);
  EXPECT_NE(s.message().find("of 1025 bytes exceeds the limit of 1024 bytes"),
            std::string::npos) << s;
  EXPECT_LT(s.message().size(), 200u);  // the name is cut in the error
  props = {{"", "v"}};
  EXPECT_FALSE(CheckMessageHeaders("", "", props, &which).ok());
  EXPECT_EQ(which, HeaderLimit::kPropertyName);
  props = {{"big", std::string(kMaxPropertyValueBytes + 1, 'v')}};
  s = CheckMessageHeaders("", "", props, &which);
  EXPECT_EQ(which, HeaderLimit::kPropertyValue);
  EXPECT_EQ(s.message(), "value of property 'big' of 16385 bytes exceeds the limit of 16384 bytes");
}

TEST(MessageLimitsTest, CountAndTotalBytes) {
  std::map<std::string, std::string> props;
  for (size_t i = 0; i < kMaxProperties; ++i) props["p" + std::to_string(i)] = "v";
  HeaderLimit which = HeaderLimit::kNone;
  EXPECT_TRUE(CheckMessageHeaders("", "", props).ok());
  // The endpoint's own properties do not count against the 128, but have their own bound.
  for (size_t i = 0; i < kMaxEndpointProperties; ++i) {
    props[std::string(kEndpointPropertyPrefix) + std::to_string(i)] = "v";
  }
  EXPECT_TRUE(CheckMessageHeaders("", "", props).ok());
  props["__RMQ_one_too_many"] = "v";
  EXPECT_FALSE(CheckMessageHeaders("", "", props, &which).ok());
  EXPECT_EQ(which, HeaderLimit::kPropertyCount);
  props.erase("__RMQ_one_too_many");
  props["p128"] = "v";
  absl::Status s = CheckMessageHeaders("", "", props, &which);
  EXPECT_EQ(which, HeaderLimit::kPropertyCount);
  EXPECT_EQ(s.message(), "129 properties exceed the limit of 128 per message");
  std::map<std::string, std::string> many;
  for (int i = 0; i < 10'000; ++i) many["p" + std::to_string(i)] = "v";
  EXPECT_EQ(CheckMessageHeaders("", "", many).message(),
            "10000 properties exceed the limit of 128 per message");

  // Total: key + tag + names + values, at most 32 KiB; each part within its own limit.
  const std::string key(kMaxKeyBytes, 'k');
  const std::string tag(kMaxTagBytes, 't');
  EXPECT_TRUE(CheckMessageHeaders(key, tag, std::map<std::string, std::string>{}).ok());
  s = CheckMessageHeaders(key, tag, std::map<std::string, std::string>{{"a", ""}}, &which);
  EXPECT_EQ(which, HeaderLimit::kHeaderBytes);
  EXPECT_EQ(s.message(),
            "key, tag and properties of 32769 bytes together exceed the limit of 32768 bytes");
}

TEST(MessageLimitsTest, ReceiveAnswerOverheadFitsTheDefaultFrameWithTheDefaultBody) {
  // A 4 MiB body (the default max message size) plus everything else a receive answer can hold
  // stays far below the 16 MiB frame; the broker refuses configs where it would not.
  EXPECT_LE((4u << 20) + kMaxMessageOverheadBytes, 16u << 20);
  EXPECT_GE(kMaxMessageOverheadBytes, 2 * kMaxHeaderBytes);
}

}  // namespace
}  // namespace tokimq
