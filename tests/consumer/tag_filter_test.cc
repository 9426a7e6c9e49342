// Tag filter (broker/src/consumer/tag_filter.h).
#include "consumer/tag_filter.h"

#include <gtest/gtest.h>

namespace tokimq::consumer {
namespace {

TEST(TagFilter, StarEmptyAndAlternatives) {
  EXPECT_TRUE(TagMatches("", "x"));
  EXPECT_TRUE(TagMatches("*", ""));
  EXPECT_TRUE(TagMatches("a||b", "b"));
  EXPECT_TRUE(TagMatches(" a || b ", "a"));
  EXPECT_FALSE(TagMatches("a||b", "c"));
  EXPECT_FALSE(TagMatches("a||b", ""));
  EXPECT_FALSE(TagMatches("ab", "a"));
}

TEST(TagFilter, BlankFilterTakesEverything) {
  EXPECT_TRUE(TagMatches("   ", "x"));
  EXPECT_TRUE(TagMatches(" * ", "x"));
}

TEST(TagFilter, StarAmongAlternativesTakesEverything) {
  EXPECT_TRUE(TagMatches("a||*", "zzz"));
}

TEST(TagFilter, EmptyAlternativesMatchNothing) {
  EXPECT_FALSE(TagMatches("||", ""));
  EXPECT_FALSE(TagMatches("a||||b", ""));
  EXPECT_TRUE(TagMatches("a||||b", "b"));
}

TEST(TagFilter, MatchIsExactAndCaseSensitive) {
  EXPECT_FALSE(TagMatches("TagA", "taga"));
  EXPECT_FALSE(TagMatches("a|b", "a"));  // a single bar is part of the name
  EXPECT_TRUE(TagMatches("a|b", "a|b"));
  EXPECT_FALSE(TagMatches("a", " a"));  // spaces are trimmed from the filter, not the tag
}

}  // namespace
}  // namespace tokimq::consumer
