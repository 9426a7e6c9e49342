// Fuzz target: human durations and timestamps (common/duration.h).
//
// Properties: a parsed duration is >= 0, formats to a text that parses back to the same value
// and is a fixed point of Format(Parse(.)); a parsed timestamp in years 0000..9999 formats to
// RFC 3339 text that parses back to it; FormatDuration of any int64 (the input's first 8 bytes)
// is defined, and for values >= 0 parses back.
#include <cstdint>
#include <cstring>

#include "common/coding.h"
#include "common/duration.h"
#include "fuzz_check.h"

namespace {

// 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the years ParseTimestamp reads.
constexpr int64_t kMinTimestampMs = -62'167'219'200'000;
constexpr int64_t kMaxTimestampMs = 253'402'300'799'999;

void CheckDurationValue(int64_t ms) {
  std::string text = tokimq::FormatDuration(ms);
  FUZZ_CHECK(!text.empty());
  if (ms < 0) {
    FUZZ_CHECK(text[0] == '-');
    return;
  }
  absl::StatusOr<int64_t> back = tokimq::ParseDuration(text);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == ms);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = tokimq::fuzz::AsView(data, size);

  absl::StatusOr<int64_t> d = tokimq::ParseDuration(text);
  if (d.ok()) {
    FUZZ_CHECK(*d >= 0);
    std::string formatted = tokimq::FormatDuration(*d);
    absl::StatusOr<int64_t> again = tokimq::ParseDuration(formatted);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *d);
    FUZZ_CHECK(tokimq::FormatDuration(*again) == formatted);
  }

  absl::StatusOr<int64_t> t = tokimq::ParseTimestamp(text);
  if (t.ok() && *t >= kMinTimestampMs && *t <= kMaxTimestampMs) {
    std::string formatted = tokimq::FormatTimestamp(*t);
    absl::StatusOr<int64_t> again = tokimq::ParseTimestamp(formatted);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *t);
  }

  if (size >= 8) {
    const auto v = static_cast<int64_t>(tokimq::DecodeFixed64(text.data()));
    CheckDurationValue(v);
    if (v >= kMinTimestampMs && v <= kMaxTimestampMs) {
      absl::StatusOr<int64_t> back = tokimq::ParseTimestamp(tokimq::FormatTimestamp(v));
      FUZZ_CHECK(back.ok());
      FUZZ_CHECK(*back == v);
    }
  }
  return 0;
}
