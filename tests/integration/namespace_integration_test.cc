// Namespaces on the native API end to end (issue 22 item 6): the real broker binary and the C++
// client's ClientOptions::namespace_ (HandshakeRequest.resource_namespace).
#include <gtest/gtest.h>

#include <algorithm>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::ClientOptions;
using client::ReceiveOptions;
using client::SimpleConsumer;
using testing::BrokerProcess;

std::vector<std::string> TopicNames(client::AdminClient& admin) {
  std::vector<std::string> names;
  auto topics = admin.ListTopics();
  EXPECT_TRUE(topics.ok()) << topics.status();
  if (topics.ok()) {
    for (const auto& t : *topics) names.push_back(t.name());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class NamespaceIntegrationTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args = {"--manual-clock"}) {
    broker_ = std::make_unique<BrokerProcess>(dir_.Join("data"), std::move(args));
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
  }
  ClientOptions In(const std::string& ns) const {
    ClientOptions o = broker_->Options();
    o.namespace_ = ns;
    return o;
  }
  void CreateTopic(const ClientOptions& o, const std::string& name) {
    client::AdminClient admin(o);
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(proto::NORMAL);
    t.set_queues(1);
    auto created = admin.CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_EQ(created->name(), name);  // answered without the namespace
  }
  void Send(const ClientOptions& o, const std::string& topic, const std::string& body) {
    client::Producer producer(o);
    client::OutgoingMessage m;
    m.topic = topic;
    m.body = body;
    auto r = producer.Send(m);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->topic, topic);
  }
  // Receives and acks what is ready; the bodies in order.
  std::vector<std::string> Drain(const ClientOptions& o, const std::string& group,
                                 const std::string& topic) {
    SimpleConsumer consumer(o, group);
    ReceiveOptions ro;
    ro.max_messages = 32;
    ro.long_poll_ms = 200;
    auto got = consumer.Receive(topic, ro);
    EXPECT_TRUE(got.ok()) << got.status();
    std::vector<std::string> bodies;
    if (!got.ok()) return bodies;
    for (const auto& m : *got) {
      EXPECT_EQ(m.topic, topic);
      bodies.push_back(m.body);
      EXPECT_TRUE(consumer.Ack(m.receipt_handle).ok());
    }
    return bodies;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
};

TEST_F(NamespaceIntegrationTest, SameNamesInTwoNamespacesAreSeparateResources) {
  Start();
  CreateTopic(In("team_a"), "orders");
  CreateTopic(In("team-b"), "orders");
  Send(In("team_a"), "orders", "a1");
  Send(In("team-b"), "orders", "b1");
  Send(In("team_a"), "orders", "a2");
  EXPECT_EQ(Drain(In("team_a"), "billing", "orders"), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(Drain(In("team-b"), "billing", "orders"), (std::vector<std::string>{"b1"}));
  // The global namespace has no topic "orders"; it sees the stored names.
  client::Producer global(broker_->Options());
  client::OutgoingMessage m;
  m.topic = "orders";
  m.body = "g";
  EXPECT_EQ(global.Send(m).status().code(), absl::StatusCode::kNotFound);
  client::AdminClient admin(broker_->Options());
  EXPECT_EQ(TopicNames(admin), (std::vector<std::string>{"team-b%orders", "team_a%orders"}));
}

TEST_F(NamespaceIntegrationTest, AdminListsAndStatsOnlyTheNamespace) {
  Start();
  CreateTopic(In("team_a"), "orders");
  CreateTopic(In("team_a"), "payments");
  CreateTopic(In("team-b"), "orders");
  CreateTopic(broker_->Options(), "global");
  Send(In("team_a"), "orders", "a1");
  EXPECT_EQ(Drain(In("team_a"), "billing", "orders"), (std::vector<std::string>{"a1"}));

  client::AdminClient admin(In("team_a"));
  EXPECT_EQ(TopicNames(admin), (std::vector<std::string>{"orders", "payments"}));
  auto described = admin.DescribeTopic("orders");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->topic().name(), "orders");
  auto stats = admin.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->topics_size(), 2);
  EXPECT_EQ(stats->topics(0).name(), "orders");
  EXPECT_EQ(stats->topics(1).name(), "payments");
  ASSERT_EQ(stats->groups_size(), 1);
  EXPECT_EQ(stats->groups(0).group(), "billing");
  const auto& group_topics = stats->groups(0).topics();
  EXPECT_NE(std::find(group_topics.begin(), group_topics.end(), "orders"), group_topics.end());
  for (const std::string& t : group_topics) EXPECT_EQ(t.find("team_a"), std::string::npos) << t;
  // Paged: one topic per page, the namespace's topics only.
  proto::StatsRequest page;
  page.set_topic_limit(1);
  auto first = admin.Stats(page);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->topics_size(), 1);
  EXPECT_EQ(first->topics(0).name(), "orders");
  EXPECT_EQ(first->next_topics_after(), "orders");
  page.set_topics_after("orders");
  auto second = admin.Stats(page);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->topics_size(), 1);
  EXPECT_EQ(second->topics(0).name(), "payments");

  // Groups are per namespace too.
  proto::GroupConfig g;
  g.set_name("billing");
  g.set_delivery_order(proto::ORDERLY);
  auto created = admin.CreateGroup(g);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->name(), "billing");
  EXPECT_EQ(client::AdminClient(In("team-b")).DescribeGroup("billing").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(client::AdminClient(broker_->Options()).DescribeGroup("team_a%billing").ok());
}

TEST_F(NamespaceIntegrationTest, BadNamespaceIsRefusedAtTheHandshake) {
  Start();
  for (const std::string& bad : {std::string("a.b"), std::string("a%b"), std::string(65, 'n')}) {
    auto r = client::AdminClient(In(bad)).ListTopics();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("a namespace is 1..64 characters of [A-Za-z0-9_-]"),
              std::string::npos)
        << r.status();
  }
  // A name that reaches into another namespace is not a name of this one.
  client::AdminClient admin(In("team_a"));
  proto::TopicConfig t;
  t.set_name("team-b%orders");
  t.set_type(proto::NORMAL);
  EXPECT_EQ(admin.CreateTopic(t).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NamespaceIntegrationTest, AclRulesMatchTheStoredName) {
  Start({"--manual-clock", "--auth", "--auth-init-user", "root:root-secret"});
  ClientOptions root = broker_->Options();
  root.access_key = "root";
  root.secret_key = "root-secret";
  client::AdminClient admin(root);
  proto::CreateUserRequest user;
  user.set_access_key("app");
  user.set_secret_key("app-secret");
  ASSERT_TRUE(admin.CreateUser(user).ok());
  for (const char* resource : {"topic:team_a%*", "group:team_a%*"}) {
    proto::AclRuleInfo rule;
    rule.set_access_key("app");
    rule.set_resource(resource);
    rule.set_actions("pub,sub");
    ASSERT_TRUE(admin.GrantAcl(rule).ok());
  }
  ClientOptions in_a = root;
  in_a.namespace_ = "team_a";
  CreateTopic(in_a, "orders");
  ClientOptions in_b = root;
  in_b.namespace_ = "team-b";
  CreateTopic(in_b, "orders");

  ClientOptions app_a = In("team_a");
  app_a.access_key = "app";
  app_a.secret_key = "app-secret";
  ClientOptions app_b = app_a;
  app_b.namespace_ = "team-b";
  Send(app_a, "orders", "a1");
  EXPECT_EQ(Drain(app_a, "billing", "orders"), (std::vector<std::string>{"a1"}));
  client::Producer producer_b(app_b);
  client::OutgoingMessage m;
  m.topic = "orders";
  m.body = "b1";
  auto refused = producer_b.Send(m);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("topic:team-b%orders"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace tokimq
