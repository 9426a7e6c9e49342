// AuthCatalog (a cluster's users and ACL rules in etcd, issue 19 item 3) against a real etcd:
// the documented keys and values, the transactions' refusals, and the watched state.
#include "cluster/auth_catalog.h"

#include <gtest/gtest.h>

#include "cluster/etcd_process.h"
#include "cluster/group_catalog.h"
#include "test_util.h"

namespace tokimq::cluster {
namespace {

using testing::EtcdProcess;
using testing::TempDir;

proto::ClusterUser User(const std::string& ak, bool super_user = false) {
  proto::ClusterUser u;
  u.set_access_key(ak);
  u.set_secret_key(ak + "-secret");
  u.set_super_user(super_user);
  u.set_enabled(true);
  u.set_created_ms(1764642000000);
  return u;
}

proto::AclRuleInfo Rule(const std::string& ak, const std::string& resource,
                        const std::string& actions, bool deny = false) {
  proto::AclRuleInfo r;
  r.set_access_key(ak);
  r.set_resource(resource);
  r.set_actions(actions);
  r.set_deny(deny);
  return r;
}

class AuthCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start());
    etcd_client_ = std::move(*EtcdClient::Create({{etcd_.endpoint()}, 3'000}));
  }
  std::optional<std::string> Value(const std::string& key) {
    auto kv = etcd_client_->Get(key);
    if (!kv.ok() || !kv->has_value()) return std::nullopt;
    return (*kv)->value;
  }
  TempDir dir_;
  EtcdProcess etcd_{dir_.Join("etcd")};
  std::unique_ptr<EtcdClient> etcd_client_;
};

TEST_F(AuthCatalogTest, UsersAndRulesAreTheDocumentedKeysAndValues) {
  AuthCatalog catalog(etcd_client_.get(), "c1");
  ASSERT_TRUE(catalog.CreateUser(User("alice")).ok());
  ASSERT_TRUE(catalog.PutRule(Rule("alice", "topic:orders*", "pub,sub")).ok());
  EXPECT_EQ(Value("/tokimq/c1/users/alice"),
            R"({"access_key":"alice","secret_key":"alice-secret","enabled":true,)"
            R"("created_ms":"1764642000000"})");
  EXPECT_EQ(Value("/tokimq/c1/acl/alice/topic:orders*"),
            R"({"access_key":"alice","resource":"topic:orders*","actions":"pub,sub"})");
  // A grant replaces the rule of the same resource (one key).
  ASSERT_TRUE(catalog.PutRule(Rule("alice", "topic:orders*", "pub", true)).ok());
  EXPECT_EQ(Value("/tokimq/c1/acl/alice/topic:orders*"),
            R"({"access_key":"alice","resource":"topic:orders*","actions":"pub","deny":true})");
}

TEST_F(AuthCatalogTest, EachChangeIsRefusedWhenItsPreconditionFails) {
  AuthCatalog catalog(etcd_client_.get(), "c1");
  ASSERT_TRUE(catalog.CreateUser(User("alice")).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(catalog.CreateUser(User("alice", true)).status()));
  EXPECT_EQ(Value("/tokimq/c1/users/alice")->find("super_user"), std::string::npos);  // kept
  EXPECT_TRUE(absl::IsNotFound(catalog.PutRule(Rule("bob", "*", "pub")).status()));
  EXPECT_FALSE(Value("/tokimq/c1/acl/bob/*").has_value());
  EXPECT_TRUE(absl::IsNotFound(catalog.DeleteRule("alice", "topic:x").status()));
  EXPECT_TRUE(absl::IsNotFound(catalog.DeleteRule("bob", "topic:x").status()));
  EXPECT_TRUE(absl::IsNotFound(catalog.DeleteUser("bob").status()));
  ASSERT_TRUE(catalog.PutRule(Rule("alice", "topic:x", "pub")).ok());
  ASSERT_TRUE(catalog.DeleteRule("alice", "topic:x").ok());
  EXPECT_FALSE(Value("/tokimq/c1/acl/alice/topic:x").has_value());
}

TEST_F(AuthCatalogTest, DeletingAUserDeletesItsRulesAndARecreatedUserStartsWithNone) {
  AuthCatalog catalog(etcd_client_.get(), "c1");
  ASSERT_TRUE(catalog.CreateUser(User("alice")).ok());
  ASSERT_TRUE(catalog.PutRule(Rule("alice", "topic:a", "pub")).ok());
  ASSERT_TRUE(catalog.PutRule(Rule("alice", "group:g*", "sub")).ok());
  ASSERT_TRUE(catalog.CreateUser(User("alice2")).ok());  // shares the prefix "alice"
  ASSERT_TRUE(catalog.PutRule(Rule("alice2", "topic:a", "pub")).ok());
  ASSERT_TRUE(catalog.DeleteUser("alice").ok());
  EXPECT_FALSE(Value("/tokimq/c1/users/alice").has_value());
  EXPECT_TRUE(etcd_client_->RangePrefix("/tokimq/c1/acl/alice/")->kvs.empty());
  EXPECT_TRUE(Value("/tokimq/c1/acl/alice2/topic:a").has_value());
  // A rule left without its user (a grant that raced a delete, written here by hand) does not
  // come back with a user re-created under the same name.
  ASSERT_TRUE(etcd_client_->Put("/tokimq/c1/acl/alice/*", R"({"actions":"admin"})").ok());
  ASSERT_TRUE(catalog.CreateUser(User("alice")).ok());
  EXPECT_TRUE(etcd_client_->RangePrefix("/tokimq/c1/acl/alice/")->kvs.empty());
}

TEST_F(AuthCatalogTest, WatchedStateFollowsEveryChangeAndWaitAppliedSeesOwnWrites) {
  AuthCatalog writer(etcd_client_.get(), "c1");
  ASSERT_TRUE(writer.CreateUser(User("alice")).ok());
  ASSERT_TRUE(writer.PutRule(Rule("alice", "topic:orders", "pub")).ok());
  // Other keys of the cluster, another cluster's users and a rule without a user are not part
  // of the state.
  ASSERT_TRUE(GroupCatalog(etcd_client_.get(), "c1").Create(proto::GroupConfig()).ok());
  ASSERT_TRUE(AuthCatalog(etcd_client_.get(), "c2").CreateUser(User("carol")).ok());
  auto before = etcd_client_->Put("/tokimq/c1/acl/nobody/*", R"({"actions":"admin"})");
  ASSERT_TRUE(before.ok());

  AuthCatalog watcher(etcd_client_.get(), "c1");
  std::mutex mu;
  std::vector<std::pair<size_t, bool>> calls;  // (users, snapshot)
  watcher.Watch([&](const AuthState& state, bool snapshot) {
    std::lock_guard<std::mutex> lock(mu);
    calls.emplace_back(state.users.size(), snapshot);
  });
  ASSERT_TRUE(watcher.WaitApplied(*before, 10'000));  // the first snapshot
  auto rev = writer.CreateUser(User("bob", true));
  ASSERT_TRUE(rev.ok());
  ASSERT_TRUE(watcher.WaitApplied(*rev, 10'000));
  AuthState s = watcher.State();
  ASSERT_EQ(s.users.size(), 2u);
  EXPECT_TRUE(s.users.at("bob").user.super_user());
  ASSERT_EQ(s.users.at("alice").rules.size(), 1u);
  EXPECT_EQ(s.users.at("alice").rules[0].resource(), "topic:orders");
  EXPECT_EQ(s.users.at("alice").user.secret_key(), "alice-secret");

  rev = writer.DeleteRule("alice", "topic:orders");
  ASSERT_TRUE(rev.ok());
  ASSERT_TRUE(watcher.WaitApplied(*rev, 10'000));
  EXPECT_TRUE(watcher.State().users.at("alice").rules.empty());
  rev = writer.DeleteUser("bob");
  ASSERT_TRUE(rev.ok());
  ASSERT_TRUE(watcher.WaitApplied(*rev, 10'000));
  EXPECT_EQ(watcher.State().users.count("bob"), 0u);
  EXPECT_GE(watcher.State().revision, *rev);
  // A revision nobody wrote yet is not applied: WaitApplied gives up after its timeout.
  EXPECT_FALSE(watcher.WaitApplied(*rev + 1000, 50));
  watcher.Stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(calls.size(), 4u);
  EXPECT_EQ(calls.front(), std::make_pair(size_t{1}, true));  // alice only
  EXPECT_EQ(calls.back(), std::make_pair(size_t{1}, false));
}

}  // namespace
}  // namespace tokimq::cluster
