// The name rule at the RocketMQ endpoint: RocketMQ codes, the rule in the message.
#include <gtest/gtest.h>

#include <string>

#include "convert.h"

namespace tokimq::rocketmq {
namespace {

TEST(RocketmqNamesTest, GroupOutsideTheRuleIsIllegalConsumerGroupNamingTheRule) {
  EXPECT_FALSE(GroupNameError("GID_orders-1").has_value());
  for (const std::string& bad :
       {std::string("sp ace"), std::string(""), std::string(249, 'g'), std::string("n.s%group"),
        std::string("ns%a%b"), std::string("a|b")}) {
    auto e = GroupNameError(bad);
    ASSERT_TRUE(e.has_value()) << bad;
    EXPECT_EQ(e->code(), v2::Code::ILLEGAL_CONSUMER_GROUP);
    EXPECT_NE(e->message().find("a group name is 1..248 characters of [A-Za-z0-9._-]"),
              std::string::npos)
        << e->message();
  }
}

TEST(RocketmqNamesTest, TopicOutsideTheRuleIsIllegalTopic) {
  EXPECT_FALSE(TopicNameError("orders.timeout").has_value());
  EXPECT_FALSE(TopicNameError("%DLQ%GID_orders").has_value());
  auto e = TopicNameError("a:b");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), v2::Code::ILLEGAL_TOPIC);
  EXPECT_EQ(e->message(),
            "The specified topic: a:b, contains illegal characters, allowing only "
            "^[a-zA-Z0-9._-]+$; invalid topic name 'a:b': a topic name is 1..127 characters of "
            "[A-Za-z0-9._-], not '.' or '..', or %RETRY% / %DLQ% followed by a group name (a "
            "group name is 1..248 characters of [A-Za-z0-9._-], not '.' or '..')");
  EXPECT_TRUE(TopicNameError(std::string(128, 't')).has_value());
}

}  // namespace
}  // namespace tokimq::rocketmq
