// Namespaces on the native protocol (broker/src/request_namespace.h): which names of a request
// are wrapped for the connection's namespace and which names of the answer come back unwrapped.
#include "request_namespace.h"

#include <gtest/gtest.h>

namespace tokimq::broker {
namespace {

TEST(RequestNamespaceTest, ResourceNamesOfARequestAreWrapped) {
  proto::Request send;
  send.mutable_send()->add_entries()->set_topic("orders");
  send.mutable_send()->add_entries()->set_topic("ns%orders");  // already this namespace's
  ScopeRequest("ns", &send);
  EXPECT_EQ(send.send().entries(0).topic(), "ns%orders");
  EXPECT_EQ(send.send().entries(1).topic(), "ns%orders");

  proto::Request receive;
  receive.mutable_receive()->set_group("billing");
  receive.mutable_receive()->set_topic("%DLQ%billing");
  receive.mutable_receive()->set_encoded_properties(true);
  ScopeRequest("ns", &receive);
  EXPECT_EQ(receive.receive().group(), "ns%billing");
  EXPECT_EQ(receive.receive().topic(), "%DLQ%ns%billing");
  EXPECT_FALSE(receive.receive().encoded_properties());

  proto::Request create;
  create.mutable_create_group()->mutable_group()->set_name("billing");
  ScopeRequest("ns", &create);
  EXPECT_EQ(create.create_group().group().name(), "ns%billing");

  proto::Request pull;
  pull.mutable_pull()->set_group("billing");
  pull.mutable_pull()->set_topic("orders");
  ScopeRequest("ns", &pull);
  EXPECT_EQ(pull.pull().group(), "ns%billing");
  EXPECT_EQ(pull.pull().topic(), "ns%orders");
}

TEST(RequestNamespaceTest, BrokerWideRequestsPassUnchanged) {
  proto::Request grant;
  grant.mutable_grant_acl()->mutable_rule()->set_resource("topic:orders");
  ScopeRequest("ns", &grant);
  EXPECT_EQ(grant.grant_acl().rule().resource(), "topic:orders");
  proto::Request recall;
  recall.mutable_recall()->set_recall_handle("h");
  ScopeRequest("ns", &recall);
  EXPECT_EQ(recall.recall().recall_handle(), "h");
}

TEST(RequestNamespaceTest, StatsPagesStartAtTheNamespace) {
  proto::Request stats;
  stats.mutable_stats();
  ScopeRequest("ns", &stats);
  EXPECT_EQ(stats.stats().topics_after(), "ns%");
  EXPECT_EQ(stats.stats().groups_after(), "ns%");
  stats.mutable_stats()->set_topics_after("orders");
  stats.mutable_stats()->set_groups_after("");
  ScopeRequest("ns", &stats);
  EXPECT_EQ(stats.stats().topics_after(), "ns%orders");
}

TEST(RequestNamespaceTest, AnswersKeepTheNamespaceOnlyAndNameItsResourcesWithoutIt) {
  proto::Response list;
  for (const char* name : {"a%orders", "ns%orders", "orders", "%DLQ%ns%billing", "ns%payments"}) {
    list.mutable_list_topics()->add_topics()->set_name(name);
  }
  UnscopeResponse("ns", proto::Request::kListTopics, &list);
  ASSERT_EQ(list.list_topics().topics_size(), 3);
  EXPECT_EQ(list.list_topics().topics(0).name(), "orders");
  EXPECT_EQ(list.list_topics().topics(1).name(), "%DLQ%billing");
  EXPECT_EQ(list.list_topics().topics(2).name(), "payments");

  proto::Response stats;
  proto::StatsResponse* s = stats.mutable_stats();
  s->add_topics()->set_name("ns%orders");
  s->add_topics()->set_name("nt%orders");
  proto::GroupStats* g = s->add_groups();
  g->set_group("ns%billing");
  g->add_topics("ns%orders");
  g->add_topic_stats()->set_topic("ns%orders");
  s->add_groups()->set_group("other");
  s->set_next_topics_after("nt%orders");  // past the namespace: the last page
  s->set_next_groups_after("ns%billing");
  UnscopeResponse("ns", proto::Request::kStats, &stats);
  ASSERT_EQ(s->topics_size(), 1);
  EXPECT_EQ(s->topics(0).name(), "orders");
  ASSERT_EQ(s->groups_size(), 1);
  EXPECT_EQ(s->groups(0).group(), "billing");
  EXPECT_EQ(s->groups(0).topics(0), "orders");
  EXPECT_EQ(s->groups(0).topic_stats(0).topic(), "orders");
  EXPECT_EQ(s->next_topics_after(), "");
  EXPECT_EQ(s->next_groups_after(), "billing");

  proto::Response received;
  received.mutable_receive()->add_messages()->set_topic("ns%orders");
  UnscopeResponse("ns", proto::Request::kReceive, &received);
  EXPECT_EQ(received.receive().messages(0).topic(), "orders");

  proto::Response sent;
  sent.mutable_send()->add_results()->set_topic("ns%orders");
  UnscopeResponse("ns", proto::Request::kSend, &sent);
  EXPECT_EQ(sent.send().results(0).topic(), "orders");
}

}  // namespace
}  // namespace tokimq::broker
