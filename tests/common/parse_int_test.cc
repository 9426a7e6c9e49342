// Decimal integer parsing (common/parse_int.h).
#include "common/parse_int.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tokimq {
namespace {

TEST(ParseInt64, TakesAnOptionalMinusAndDigitsOverTheWholeString) {
  int64_t v = 7;
  EXPECT_TRUE(ParseInt64("1700000000000", &v));
  EXPECT_EQ(v, 1'700'000'000'000);
  EXPECT_TRUE(ParseInt64("-42", &v));
  EXPECT_EQ(v, -42);
  EXPECT_TRUE(ParseInt64("9223372036854775807", &v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_TRUE(ParseInt64("-9223372036854775808", &v));
  EXPECT_EQ(v, INT64_MIN);
}

TEST(ParseInt64, RefusesEmptyTrailingBytesSignsSpacesAndOverflowLeavingTheOutputAlone) {
  for (const char* bad : {"", "12abc", "+5", " 5", "5 ", "-", "9223372036854775808", "0x10"}) {
    int64_t v = 7;
    EXPECT_FALSE(ParseInt64(bad, &v)) << bad;
    EXPECT_EQ(v, 7) << bad;
  }
}

TEST(ParseNonNegativeInt64, TakesDigitsOnly) {
  int64_t v = 0;
  EXPECT_TRUE(ParseNonNegativeInt64("00000000000000000042", &v));  // 20 digits, leading zeros
  EXPECT_EQ(v, 42);
  EXPECT_FALSE(ParseNonNegativeInt64("-0", &v));
  EXPECT_FALSE(ParseNonNegativeInt64("-1", &v));
  EXPECT_FALSE(ParseNonNegativeInt64("9223372036854775808", &v));  // INT64_MAX + 1
  EXPECT_FALSE(ParseNonNegativeInt64("99999999999999999999", &v));
}

TEST(ParseUint64, TakesTheWholeUnsignedRange) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseUint64("18446744073709551615", &v));
  EXPECT_EQ(v, UINT64_MAX);
  EXPECT_FALSE(ParseUint64("18446744073709551616", &v));
  EXPECT_FALSE(ParseUint64("-1", &v));
}

}  // namespace
}  // namespace tokimq
