#include "commitlog/record.h"

#include <gtest/gtest.h>

#include <string>

#include "common/coding.h"

namespace tokimq {
namespace {

Message Sample(size_t body_size, int props) {
  Message m;
  m.topic = "orders";
  m.queue_id = 3;
  m.queue_offset = QueueOffset(77);
  m.physical_offset = PhysicalOffset(123456);
  m.born_ms = 1'700'000'000'123;
  m.store_ms = 1'700'000'000'456;
  m.flags = 0;
  for (int i = 0; i < props; ++i) m.properties["key" + std::to_string(i)] = std::string(i, 'v');
  m.body.resize(body_size);
  for (size_t i = 0; i < body_size; ++i) m.body[i] = static_cast<char>(i * 131 + 7);
  return m;
}

void ExpectSame(const Message& a, const Message& b) {
  EXPECT_EQ(a.topic, b.topic);
  EXPECT_EQ(a.queue_id, b.queue_id);
  EXPECT_EQ(a.queue_offset.value(), b.queue_offset.value());
  EXPECT_EQ(a.physical_offset.value(), b.physical_offset.value());
  EXPECT_EQ(a.born_ms, b.born_ms);
  EXPECT_EQ(a.store_ms, b.store_ms);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.properties, b.properties);
  EXPECT_EQ(a.body, b.body);
}

class RecordTest : public ::testing::TestWithParam<std::pair<size_t, int>> {};

TEST_P(RecordTest, RoundTripKeepsEveryField) {
  Message in = Sample(GetParam().first, GetParam().second);
  std::string rec;
  record::Encode(in, &rec);
  ASSERT_EQ(rec.size(), in.EncodedSize());
  Message out;
  ASSERT_TRUE(record::Decode(rec, &out).ok());
  ExpectSame(in, out);
  EXPECT_TRUE(record::VerifyMessage(rec));
}

INSTANTIATE_TEST_SUITE_P(Bodies, RecordTest,
                         ::testing::Values(std::make_pair(size_t{0}, 0),
                                           std::make_pair(size_t{1}, 0),
                                           std::make_pair(size_t{4} << 20, 0),
                                           std::make_pair(size_t{100}, 200),
                                           std::make_pair(size_t{4} << 20, 50)));

TEST(RecordCodecTest, EmptyMessageHasMinimumSize) {
  Message m;
  EXPECT_EQ(m.EncodedSize(), record::kMinMessageSize);
  std::string rec;
  record::Encode(m, &rec);
  EXPECT_EQ(DecodeFixed32(rec.data()), record::kMessageMagicV1);
  EXPECT_EQ(DecodeFixed32(rec.data() + 4), record::kMinMessageSize);
}

TEST(RecordCodecTest, EveryFlippedBitIsDetected) {
  Message in = Sample(40, 3);
  std::string rec;
  record::Encode(in, &rec);
  for (size_t bit = 0; bit < rec.size() * 8; ++bit) {
    std::string bad = rec;
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    Message out;
    absl::Status s = record::Decode(bad, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "bit " << bit;
  }
}

TEST(RecordCodecTest, ChecksumMismatchIsReportedAsSuch) {
  Message in = Sample(10, 0);
  std::string rec;
  record::Encode(in, &rec);
  rec.back() ^= 0x01;
  Message out;
  absl::Status s = record::Decode(rec, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("checksum"), std::string::npos);
}

TEST(RecordCodecTest, WrongLengthIsRejected) {
  Message in = Sample(10, 0);
  std::string rec;
  record::Encode(in, &rec);
  Message out;
  EXPECT_EQ(record::Decode(std::string_view(rec).substr(0, rec.size() - 1), &out).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(record::Decode(rec + "x", &out).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(record::Decode("short", &out).code(), absl::StatusCode::kDataLoss);
}

TEST(RecordCodecTest, BlankRecordVerifies) {
  char blank[record::kBlankSize];
  record::EncodeBlankTo(999, blank);
  std::string_view v(blank, sizeof(blank));
  EXPECT_TRUE(record::IsValidBlank(v));
  EXPECT_EQ(record::DecodePrefix(blank).total_size, 999u);
  blank[5] ^= 1;
  EXPECT_FALSE(record::IsValidBlank(v));
}

}  // namespace
}  // namespace tokimq
