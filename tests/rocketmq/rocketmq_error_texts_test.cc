// RocketMQ's error texts at the gRPC endpoint (rocketmq/src/error_texts.h): the words RocketMQ
// users search for, with tokimq's detail after them.
#include <gtest/gtest.h>

#include <string>

#include "convert.h"
#include "error_texts.h"

namespace tokimq::rocketmq {
namespace {

TEST(RocketmqErrorTextsTest, NotFoundTextsAreRocketMqs) {
  EXPECT_EQ(RouteNotFoundText("orders"),
            "No topic route info in name server for the topic: orders (tokimq: create it with "
            "`tokimq topic create --name orders`)");
  EXPECT_EQ(TopicNotFoundText("orders"),
            "topic[orders] not exist, apply first please! (tokimq: create it with `tokimq topic "
            "create --name orders`)");
  EXPECT_EQ(GroupNotFoundText("GID_a"),
            "subscription group [GID_a] does not exist, apply first please! (tokimq: create it "
            "with `tokimq group create --name GID_a`)");
}

TEST(RocketmqErrorTextsTest, IllegalNamesInTopicValidatorsWords) {
  EXPECT_EQ(IllegalTopicText("a|b"),
            "The specified topic: a|b, contains illegal characters, allowing only "
            "^[a-zA-Z0-9._-]+$");
  EXPECT_EQ(IllegalTopicText(std::string(128, 't')).rfind(
                "The specified topic: tttt", 0), 0u);
  EXPECT_NE(IllegalTopicText(std::string(128, 't')).find(", is longer than topic max length: 127"),
            std::string::npos);
  EXPECT_EQ(IllegalTopicText(""), "The specified topic is blank.");
  EXPECT_EQ(IllegalGroupText("g%1"),
            "The specified group: g%1, contains illegal characters, allowing only "
            "^[a-zA-Z0-9._-]+$");
  EXPECT_NE(IllegalGroupText(std::string(249, 'g')).find("is longer than group max length: 248"),
            std::string::npos);
  // A retry / DLQ topic is judged by its group part.
  EXPECT_EQ(IllegalTopicText("%DLQ%g 1"),
            "The specified group: g 1, contains illegal characters, allowing only "
            "^[a-zA-Z0-9._-]+$");
}

TEST(RocketmqErrorTextsTest, SizeAndInvisibleTimeTexts) {
  EXPECT_EQ(BodyTooLargeText(70000, 65536),
            "message body cannot exceed the max 65536 (body of 70000 bytes)");
  EXPECT_EQ(InvisibleTimeText(0, 1, 43'200'000),
            "the invisibleTime is too small. min is 1 (got 0 ms)");
  EXPECT_EQ(InvisibleTimeText(43'200'001, 1, 43'200'000),
            "the invisibleTime is too large. max is 43200000 (got 43200001 ms)");
}

TEST(RocketmqErrorTextsTest, NativeNotFoundAnswersGetRocketMqsTextFirst) {
  v2::Status s = MakeStatus(v2::Code::TOPIC_NOT_FOUND, "topic 'x' does not exist");
  UseRocketMqText(&s, RpcKind::kSend, "x", "g");
  EXPECT_EQ(s.message(), TopicNotFoundText("x") + "; topic 'x' does not exist");
  v2::Status r = MakeStatus(v2::Code::TOPIC_NOT_FOUND, "");
  UseRocketMqText(&r, RpcKind::kRoute, "x", "g");
  EXPECT_EQ(r.message(), RouteNotFoundText("x"));
  v2::Status g = MakeStatus(v2::Code::CONSUMER_GROUP_NOT_FOUND, "");
  UseRocketMqText(&g, RpcKind::kReceive, "x", "g");
  EXPECT_EQ(g.message(), GroupNotFoundText("g"));
  v2::Status other = MakeStatus(v2::Code::BAD_REQUEST, "keep");
  UseRocketMqText(&other, RpcKind::kSend, "x", "g");
  EXPECT_EQ(other.message(), "keep");
}

}  // namespace
}  // namespace tokimq::rocketmq
