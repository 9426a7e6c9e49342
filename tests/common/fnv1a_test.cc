// FNV-1a 64 (common/fnv1a.h) against the FNV specification's test vectors.
#include "common/fnv1a.h"

#include <gtest/gtest.h>

#include <string>

namespace tokimq {
namespace {

TEST(Fnv1a64, MatchesTheSpecificationVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(Fnv1a64, HashesBytesAboveSevenBitsAsUnsigned) {
  // 0xff ^ basis, times the prime: a signed char would sign-extend and give another value.
  EXPECT_EQ(Fnv1a64(std::string(1, '\xff')),
            (0xcbf29ce484222325ULL ^ 0xffULL) * 0x100000001b3ULL);
}

TEST(Fnv1a64, IsUsableAtCompileTime) {
  constexpr uint64_t kHashOfA = Fnv1a64("a");
  EXPECT_EQ(kHashOfA, 0xaf63dc4c8601ec8cULL);
}

}  // namespace
}  // namespace tokimq
