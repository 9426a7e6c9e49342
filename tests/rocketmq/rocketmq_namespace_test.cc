// Namespaces at the RocketMQ endpoint (rocketmq/src/namespace_scope.h): which namespace wraps
// each Resource of a request, and answers split back into resource_namespace and name.
#include <gtest/gtest.h>

#include <string>

#include "convert.h"
#include "namespace_scope.h"

namespace tokimq::rocketmq {
namespace {

v2::Resource Res(const std::string& ns, const std::string& name) {
  v2::Resource r;
  r.set_resource_namespace(ns);
  r.set_name(name);
  return r;
}

TEST(RocketmqNamespaceTest, ResourceNamespaceWinsOverTheCallHeader) {
  v2::SendMessageRequest req;
  *req.add_messages()->mutable_topic() = Res("prod", "orders");
  *req.add_messages()->mutable_topic() = Res("", "orders");
  WrapResources("test", &req);
  EXPECT_EQ(req.messages(0).topic().name(), "prod%orders");
  EXPECT_EQ(req.messages(1).topic().name(), "test%orders");
  EXPECT_EQ(req.messages(0).topic().resource_namespace(), "");
  EXPECT_EQ(req.messages(1).topic().resource_namespace(), "");
}

TEST(RocketmqNamespaceTest, EveryResourceOfARequestIsWrappedAtAnyDepth) {
  // What the Node.js client 1.0.8 sends from a consumer: no resource_namespace, the header only.
  v2::ReceiveMessageRequest recv;
  *recv.mutable_group() = Res("", "billing");
  *recv.mutable_message_queue()->mutable_topic() = Res("", "orders");
  WrapResources("prod", &recv);
  EXPECT_EQ(recv.group().name(), "prod%billing");
  EXPECT_EQ(recv.message_queue().topic().name(), "prod%orders");

  v2::TelemetryCommand settings;
  v2::Subscription* sub = settings.mutable_settings()->mutable_subscription();
  *sub->mutable_group() = Res("", "billing");
  *sub->add_subscriptions()->mutable_topic() = Res("", "orders");
  WrapResources("prod", &settings);
  EXPECT_EQ(sub->group().name(), "prod%billing");
  EXPECT_EQ(sub->subscriptions(0).topic().name(), "prod%orders");
  v2::TelemetryCommand publishing;
  *publishing.mutable_settings()->mutable_publishing()->add_topics() = Res("test", "payments");
  WrapResources("prod", &publishing);
  EXPECT_EQ(publishing.settings().publishing().topics(0).name(), "test%payments");

  v2::ForwardMessageToDeadLetterQueueRequest dlq;
  *dlq.mutable_group() = Res("", "%DLQ%billing");
  WrapResources("prod", &dlq);
  EXPECT_EQ(dlq.group().name(), "%DLQ%prod%billing");
}

TEST(RocketmqNamespaceTest, NoNamespaceChangesNothing) {
  v2::AckMessageRequest ack;
  *ack.mutable_group() = Res("", "billing");
  *ack.mutable_topic() = Res("", "orders");
  const std::string before = ack.SerializeAsString();
  WrapResources("", &ack);
  EXPECT_EQ(ack.SerializeAsString(), before);
  EXPECT_FALSE(HoldsNamespacedResource(ack));
}

TEST(RocketmqNamespaceTest, BadNamespaceMakesANameTheRuleRefuses) {
  v2::QueryRouteRequest route;
  *route.mutable_topic() = Res("a.b", "orders");
  WrapResources("", &route);
  auto e = TopicNameError(route.topic().name());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), v2::Code::ILLEGAL_TOPIC);
  EXPECT_NE(e->message().find("a namespace is 1..64 characters of [A-Za-z0-9_-]"),
            std::string::npos)
      << e->message();
  v2::QueryAssignmentRequest assign;
  *assign.mutable_group() = Res(std::string(65, 'n'), "billing");
  WrapResources("", &assign);
  auto g = GroupNameError(assign.group().name());
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->code(), v2::Code::ILLEGAL_CONSUMER_GROUP);
}

TEST(RocketmqNamespaceTest, AnswersGiveTheNamespaceBackInResourceNamespace) {
  v2::QueryRouteResponse route;
  route.add_message_queues()->mutable_topic()->set_name("prod%orders");
  route.add_message_queues()->mutable_topic()->set_name("orders");
  EXPECT_TRUE(HoldsNamespacedResource(route));
  UnwrapResources(&route);
  EXPECT_EQ(route.message_queues(0).topic().name(), "orders");
  EXPECT_EQ(route.message_queues(0).topic().resource_namespace(), "prod");
  EXPECT_EQ(route.message_queues(1).topic().name(), "orders");
  EXPECT_EQ(route.message_queues(1).topic().resource_namespace(), "");

  v2::ReceiveMessageResponse msg;
  msg.mutable_message()->mutable_topic()->set_name("%DLQ%prod%billing");
  UnwrapResources(&msg);
  EXPECT_EQ(msg.message().topic().name(), "%DLQ%billing");
  EXPECT_EQ(msg.message().topic().resource_namespace(), "prod");
}

}  // namespace
}  // namespace tokimq::rocketmq
