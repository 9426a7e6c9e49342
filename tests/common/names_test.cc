// The name rule (common/names.h) and the log limiter (common/log_limiter.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/log_limiter.h"
#include "common/names.h"

namespace tokimq {
namespace {

TEST(NamesTest, TopicNamesAreOneTo127CharactersOfTheNameSet) {
  EXPECT_TRUE(IsValidTopicName("orders"));
  EXPECT_TRUE(IsValidTopicName("Orders.v2_eu-west-1"));
  EXPECT_TRUE(IsValidTopicName(std::string(127, 'a')));
  EXPECT_FALSE(IsValidTopicName(std::string(128, 'a')));
  EXPECT_FALSE(IsValidTopicName(""));
  EXPECT_FALSE(IsValidTopicName("."));
  EXPECT_FALSE(IsValidTopicName(".."));
  EXPECT_TRUE(IsValidTopicName("..."));
  for (const std::string& bad :
       std::vector<std::string>{"sp ace", "a/b", "a:b", "a~b", "%b", "a%", "a|b", "tab\t",
                                "caf\xc3\xa9", std::string("nul\0x", 5)}) {
    EXPECT_FALSE(IsValidTopicName(bad)) << bad;
  }
}

TEST(NamesTest, GroupNamesAreOneTo248CharactersOfTheNameSet) {
  EXPECT_TRUE(IsValidGroupName("billing-workers"));
  EXPECT_TRUE(IsValidGroupName(std::string(248, 'g')));
  EXPECT_FALSE(IsValidGroupName(std::string(249, 'g')));
  EXPECT_FALSE(IsValidGroupName("sp ace"));  // a name with a space
  EXPECT_FALSE(IsValidGroupName("%sys"));
  EXPECT_FALSE(IsValidGroupName(""));
  EXPECT_FALSE(IsValidGroupName(".."));
}

TEST(NamesTest, EveryValidGroupHasValidRetryAndDlqDestinations) {
  for (const std::string& g : {std::string("g"), std::string(248, 'g'), std::string("a.b-c_d")}) {
    ASSERT_TRUE(IsValidGroupName(g));
    EXPECT_TRUE(IsValidDestination(kRetryTopicPrefix + g)) << g.size();
    EXPECT_TRUE(IsValidDestination(kDlqTopicPrefix + g)) << g.size();
    EXPECT_LE((kRetryTopicPrefix + g).size(), kMaxDestinationBytes);
  }
  EXPECT_FALSE(IsValidDestination("%RETRY%sp ace"));
  EXPECT_FALSE(IsValidDestination("%RETRY%"));
  EXPECT_FALSE(IsValidDestination("%DLQ%"));
  EXPECT_FALSE(IsValidDestination("%OTHER%g"));
  EXPECT_TRUE(IsValidDestination("tokimq_sys_timer"));
  EXPECT_TRUE(IsValidDestination(kPoisonTopic));
}

TEST(NamesTest, ErrorsNameTheRuleAndEscapeTheName) {
  absl::Status s = ValidateGroupName("sp ace\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "invalid group name 'sp ace\\n': a group name is 1..248 characters of "
            "[A-Za-z0-9._-], not '.' or '..'");
  s = ValidateTopicName(std::string(200, 'x') + " ");
  EXPECT_EQ(s.message(), "invalid topic name '" + std::string(80, 'x') +
                             "...': a topic name is 1..127 characters of [A-Za-z0-9._-], not "
                             "'.' or '..'");
  EXPECT_TRUE(ValidateDestination("%DLQ%g").ok());
  EXPECT_NE(ValidateDestination("%RETRY%sp ace").message().find("%RETRY% / %DLQ% followed"),
            std::string_view::npos);
}

TEST(LogLimiterTest, LetsBurstThroughPerIntervalAndCountsTheRest) {
  LogLimiter limiter(2, 1000);
  uint64_t held = 99;
  EXPECT_TRUE(limiter.Allow(5000, &held));
  EXPECT_EQ(held, 0u);
  EXPECT_TRUE(limiter.Allow(5001, &held));
  EXPECT_FALSE(limiter.Allow(5002, &held));
  EXPECT_FALSE(limiter.Allow(5999, &held));
  EXPECT_FALSE(limiter.Allow(5999, &held));
  EXPECT_TRUE(limiter.Allow(6000, &held));
  EXPECT_EQ(held, 3u);
  EXPECT_TRUE(limiter.Allow(6001, &held));
  EXPECT_EQ(held, 0u);
}

}  // namespace
}  // namespace tokimq
