// Users and ACL rules of a cluster live in etcd (issue 19 item 3; docs/security.md "Clusters"):
// a real etcd and real tokimq-broker processes with --auth. A user created through one broker
// authenticates on another; an ACL change through one broker is enforced by another within the
// watch delay; a broker started later (empty data dir, no --auth-init-user) gets every user from
// etcd; the brokers' --auth-init-user seeds the empty cluster.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/admin.h"
#include "client/producer.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_process.h"
#include "integration/broker_process.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::AdminClient;
using client::ClientOptions;
using testing::BrokerProcess;
using testing::EtcdProcess;
using testing::TempDir;

constexpr char kRootKey[] = "root";
constexpr char kRootSecret[] = "root-secret-1";

// Bounded await: polls `pred` every 10 ms until it holds or `timeout_ms` (real time) passed;
// returns the elapsed ms when it held, -1 otherwise.
int64_t AwaitMs(const std::function<bool()>& pred, int64_t timeout_ms = 15'000) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (pred()) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - start)
          .count();
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

class AuthClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.Start()) << "etcd did not start"; }

  // Starts broker `name` with --auth (and the root user unless `init_user` is false).
  void StartBroker(const std::string& name, bool init_user = true) {
    std::vector<std::string> args = {"--cluster", "c1", "--etcd-endpoints", etcd_.endpoint(),
                                     "--broker-name", name, "--grpc-port", "0", "--auth"};
    if (init_user) {
      args.push_back("--auth-init-user");
      args.push_back(std::string(kRootKey) + ":" + kRootSecret);
    }
    brokers_.push_back(std::make_unique<BrokerProcess>(dir_.Join(name), args));
    ASSERT_TRUE(brokers_.back()->Start()) << name;
  }
  ClientOptions As(int broker, const std::string& ak, const std::string& sk) {
    ClientOptions o = brokers_[broker]->Options();
    o.access_key = ak;
    o.secret_key = sk;
    o.request_timeout_ms = 5'000;
    return o;
  }
  ClientOptions Root(int broker) { return As(broker, kRootKey, kRootSecret); }
  void WaitMembers(int n) {
    ASSERT_GE(AwaitMs([&] {
                for (size_t i = 0; i < brokers_.size(); ++i) {
                  auto st = AdminClient(Root(static_cast<int>(i))).ClusterStatus();
                  if (!st.ok() || st->members_size() != n) return false;
                }
                return true;
              }, 30'000),
              0);
  }
  // A topic on every live broker, applied by each.
  void CreateTopic(const std::string& name) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(proto::NORMAL);
    t.set_queues(1);
    auto created = AdminClient(Root(0)).CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
    for (size_t i = 0; i < brokers_.size(); ++i) {
      ASSERT_GE(AwaitMs([&] {
                  return AdminClient(Root(static_cast<int>(i))).DescribeTopic(name).ok();
                }),
                0);
    }
  }
  absl::Status SendAs(int broker, const std::string& ak, const std::string& sk,
                      const std::string& topic) {
    client::OutgoingMessage m;
    m.topic = topic;
    m.body = "x";
    return client::Producer(As(broker, ak, sk)).Send(m).status();
  }
  absl::Status CreateUser(int broker, const std::string& ak, const std::string& sk) {
    proto::CreateUserRequest u;
    u.set_access_key(ak);
    u.set_secret_key(sk);
    return AdminClient(Root(broker)).CreateUser(u);
  }
  absl::Status Grant(int broker, const std::string& ak, const std::string& resource,
                     const std::string& actions, bool deny = false) {
    proto::AclRuleInfo r;
    r.set_access_key(ak);
    r.set_resource(resource);
    r.set_actions(actions);
    r.set_deny(deny);
    return AdminClient(Root(broker)).GrantAcl(r);
  }

  TempDir dir_;
  EtcdProcess etcd_{dir_.Join("etcd")};
  std::vector<std::unique_ptr<BrokerProcess>> brokers_;
};

TEST_F(AuthClusterTest, UserMadeOnOneBrokerSendsOnAnotherAndAnAclChangeOnItIsEnforcedEverywhere) {
  StartBroker("b0");
  StartBroker("b1");
  WaitMembers(2);  // root authenticates on both: their --auth-init-user seeded etcd
  CreateTopic("orders");

  ASSERT_TRUE(CreateUser(0, "app", "app-secret-1").ok());
  ASSERT_TRUE(Grant(0, "app", "topic:orders", "pub").ok());
  // Through b0 only; b1 learns both from its watch.
  const int64_t user_ms = AwaitMs([&] { return SendAs(1, "app", "app-secret-1", "orders").ok(); });
  ASSERT_GE(user_ms, 0) << SendAs(1, "app", "app-secret-1", "orders");
  std::printf("user + grant through b0: send on b1 accepted after %lld ms\n",
              static_cast<long long>(user_ms));
  EXPECT_TRUE(SendAs(0, "app", "app-secret-1", "orders").ok());
  EXPECT_TRUE(absl::IsUnauthenticated(SendAs(1, "app", "wrong-secret", "orders")));

  // An ACL change through b1 is enforced by b0.
  ASSERT_TRUE(Grant(1, "app", "topic:orders", "pub", /*deny=*/true).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(SendAs(1, "app", "app-secret-1", "orders")))
      << "the answering broker applied it before answering";
  const int64_t deny_ms =
      AwaitMs([&] { return absl::IsPermissionDenied(SendAs(0, "app", "app-secret-1", "orders")); });
  ASSERT_GE(deny_ms, 0) << SendAs(0, "app", "app-secret-1", "orders");
  std::printf("deny through b1: send on b0 refused after %lld ms\n",
              static_cast<long long>(deny_ms));

  // Both brokers list the same users and rules; etcd holds them under the documented keys.
  for (int b : {0, 1}) {
    auto acl = AdminClient(Root(b)).ListAcl("app");
    ASSERT_TRUE(acl.ok()) << acl.status();
    ASSERT_EQ(acl->size(), 1u) << "b" << b;
    EXPECT_EQ((*acl)[0].resource(), "topic:orders");
    EXPECT_TRUE((*acl)[0].deny());
    auto users = AdminClient(Root(b)).ListUsers();
    ASSERT_TRUE(users.ok());
    EXPECT_EQ(users->size(), 2u) << "root and app on b" << b;
  }
  auto etcd = std::move(*cluster::EtcdClient::Create({{etcd_.endpoint()}, 3'000}));
  auto kv = etcd->Get("/tokimq/c1/users/app");
  ASSERT_TRUE(kv.ok() && kv->has_value());
  EXPECT_NE((*kv)->value.find("\"secret_key\":\"app-secret-1\""), std::string::npos);
  kv = etcd->Get("/tokimq/c1/acl/app/topic:orders");
  ASSERT_TRUE(kv.ok() && kv->has_value());
  EXPECT_NE((*kv)->value.find("\"deny\":true"), std::string::npos);
}

TEST_F(AuthClusterTest, BrokerStartedLaterGetsTheUsersFromEtcdAndADeleteReachesEveryBroker) {
  StartBroker("b0");
  WaitMembers(1);
  ASSERT_TRUE(CreateUser(0, "app", "app-secret-1").ok());
  ASSERT_TRUE(Grant(0, "app", "topic:orders", "pub").ok());
  // b1 has an empty data dir and no --auth-init-user: root itself must come from etcd.
  StartBroker("b1", /*init_user=*/false);
  WaitMembers(2);
  CreateTopic("orders");
  EXPECT_GE(AwaitMs([&] { return SendAs(1, "app", "app-secret-1", "orders").ok(); }), 0);
  auto acl = AdminClient(Root(1)).ListAcl("app");
  ASSERT_TRUE(acl.ok()) << acl.status();
  ASSERT_EQ(acl->size(), 1u);
  EXPECT_EQ((*acl)[0].actions(), "pub");

  // Deleted through b1: refused on b0, and the user's rules are gone with it.
  ASSERT_TRUE(AdminClient(Root(1)).DeleteUser("app").ok());
  EXPECT_GE(AwaitMs([&] {
              return absl::IsUnauthenticated(SendAs(0, "app", "app-secret-1", "orders"));
            }),
            0);
  EXPECT_TRUE(absl::IsNotFound(AdminClient(Root(0)).DeleteUser("app")));
  auto etcd = std::move(*cluster::EtcdClient::Create({{etcd_.endpoint()}, 3'000}));
  EXPECT_TRUE(etcd->RangePrefix("/tokimq/c1/acl/app/")->kvs.empty());
  // Re-created: starts without the old rule.
  ASSERT_TRUE(CreateUser(0, "app", "app-secret-2").ok());
  EXPECT_GE(AwaitMs([&] {
              return absl::IsPermissionDenied(SendAs(1, "app", "app-secret-2", "orders"));
            }),
            0);
}

}  // namespace
}  // namespace tokimq
