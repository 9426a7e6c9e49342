// Framing limits and human durations/timestamps (proto/framing.h, proto/duration.h).
#include <gtest/gtest.h>

#include <cstdint>

#include "proto/duration.h"
#include "proto/framing.h"
#include "proto/tokimq.pb.h"

namespace tokimq::wire {
namespace {

TEST(FramingTest, HeaderIsBigEndian) {
  char hdr[4];
  EncodeFrameHeader(hdr, 0x01020304);
  EXPECT_EQ(hdr[0], 1);
  EXPECT_EQ(hdr[1], 2);
  EXPECT_EQ(hdr[2], 3);
  EXPECT_EQ(hdr[3], 4);
  auto len = DecodeFrameHeader(hdr, UINT32_MAX);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(*len, 0x01020304u);
}

TEST(FramingTest, LengthAtLimitIsAcceptedAboveIsRefused) {
  char hdr[4];
  EncodeFrameHeader(hdr, kDefaultMaxFrameBytes);
  EXPECT_TRUE(DecodeFrameHeader(hdr, kDefaultMaxFrameBytes).ok());
  EncodeFrameHeader(hdr, kDefaultMaxFrameBytes + 1);
  auto len = DecodeFrameHeader(hdr, kDefaultMaxFrameBytes);
  EXPECT_EQ(len.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(len.status().message().find("16777217"), absl::string_view::npos);
  const char max[4] = {'\xff', '\xff', '\xff', '\xff'};
  EXPECT_FALSE(DecodeFrameHeader(max, kDefaultMaxFrameBytes).ok());
}

TEST(FramingTest, ZeroLengthFrameIsAnEmptyMessage) {
  char hdr[4] = {0, 0, 0, 0};
  auto len = DecodeFrameHeader(hdr, 16);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(*len, 0u);
  proto::Request req;
  EXPECT_TRUE(DecodeFrameBody("", &req).ok());
  EXPECT_EQ(req.body_case(), proto::Request::BODY_NOT_SET);
}

TEST(FramingTest, EncodeRoundTripsAndRefusesOversize) {
  proto::Request req;
  req.set_id(42);
  req.mutable_send()->add_entries()->set_body(std::string(1000, 'x'));
  auto frame = EncodeFrame(req);
  ASSERT_TRUE(frame.ok());
  auto len = DecodeFrameHeader(frame->data(), kDefaultMaxFrameBytes);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(*len, frame->size() - 4);
  proto::Request back;
  ASSERT_TRUE(DecodeFrameBody(std::string_view(*frame).substr(4), &back).ok());
  EXPECT_EQ(back.id(), 42u);
  EXPECT_EQ(back.send().entries(0).body().size(), 1000u);
  EXPECT_EQ(EncodeFrame(req, 100).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(FramingTest, GarbageBodyIsInvalidArgument) {
  proto::Request req;
  // Field 1 declared as a length-delimited field of 100 bytes with 2 present.
  std::string garbage = "\x0a\x64\x01\x02";
  EXPECT_EQ(DecodeFrameBody(garbage, &req).code(), absl::StatusCode::kInvalidArgument);
  std::string wire_type_7 = "\x0f\x01";
  EXPECT_EQ(DecodeFrameBody(wire_type_7, &req).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DurationTest, ParsesUnitsAndCompounds) {
  EXPECT_EQ(*ParseDuration("250ms"), 250);
  EXPECT_EQ(*ParseDuration("30s"), 30'000);
  EXPECT_EQ(*ParseDuration("5m"), 300'000);
  EXPECT_EQ(*ParseDuration("2h"), 7'200'000);
  EXPECT_EQ(*ParseDuration("7d"), 604'800'000);
  EXPECT_EQ(*ParseDuration("1h30m"), 5'400'000);
  EXPECT_EQ(*ParseDuration("1500"), 1500);
  EXPECT_EQ(*ParseDuration("0s"), 0);
}

TEST(DurationTest, RefusesBadInput) {
  for (const char* bad : {"", "s", "-5s", "5x", "5 s", "1.5h", "10y", "5s3", "99999999999999999999d",
                          "9999999999999999d"}) {
    EXPECT_EQ(ParseDuration(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DurationTest, FormatsShortestExactForm) {
  EXPECT_EQ(FormatDuration(0), "0ms");
  EXPECT_EQ(FormatDuration(90'000), "1m30s");
  EXPECT_EQ(FormatDuration(604'800'000), "7d");
  EXPECT_EQ(FormatDuration(1001), "1s1ms");
  for (int64_t ms : {int64_t{1}, int64_t{59'999}, int64_t{3'600'001}, int64_t{31'536'000'000}}) {
    EXPECT_EQ(*ParseDuration(FormatDuration(ms)), ms);
  }
}

// fuzz/duration found -INT64_MIN computed as an int64_t (signed overflow) here.
TEST(DurationTest, FormatsEveryNegativeValueIncludingInt64Min) {
  EXPECT_EQ(FormatDuration(-1001), "-1s1ms");
  EXPECT_EQ(FormatDuration(INT64_MIN), "-106751991167d7h12m55s808ms");
  EXPECT_EQ(FormatDuration(INT64_MAX), "106751991167d7h12m55s807ms");
}

TEST(TimestampTest, ParsesRfc3339Utc) {
  EXPECT_EQ(*ParseTimestamp("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseTimestamp("2026-12-01T10:00:00Z"), 1'796'119'200'000);
  EXPECT_EQ(*ParseTimestamp("2026-12-01T10:00:00.250Z"), 1'796'119'200'250);
  EXPECT_EQ(*ParseTimestamp("2000-02-29T23:59:59Z"), 951'868'799'000);
  EXPECT_EQ(*ParseTimestamp("1796119200000"), 1'796'119'200'000);
  EXPECT_EQ(FormatTimestamp(1'796'119'200'250), "2026-12-01T10:00:00.250Z");
}

TEST(TimestampTest, RefusesBadInput) {
  for (const char* bad : {"", "2026-12-01", "2026-12-01T10:00:00", "2026-13-01T10:00:00Z",
                          "2026-12-01T25:00:00Z", "2026-12-01T10:00:00+02:00", "yesterday"}) {
    EXPECT_EQ(ParseTimestamp(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace tokimq::wire
