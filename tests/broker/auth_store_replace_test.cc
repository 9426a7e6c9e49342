// AuthStore::ReplaceAll (cluster mode mirrors etcd's users and rules into the store: issue 19
// item 3) over a real RocksDB in a temp dir, and the permission of a recall naming its topic.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "broker/auth/auth_store.h"
#include "broker/auth/permissions.h"
#include "test_util.h"

namespace tokimq::broker::auth {
namespace {

class AuthStoreReplaceTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    store_.reset();
    db_.reset();
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_.Join("meta"), &raw).ok());
    db_.reset(raw);
    auto s = AuthStore::Open(db_.get());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  static AuthStore::UserWithRules Entry(const std::string& ak, const std::string& sk,
                                        std::vector<std::pair<std::string, ActionSet>> rules,
                                        UserType type = UserType::kNormal) {
    AuthStore::UserWithRules u;
    u.user = User{ak, sk, type, true};
    for (const auto& [res, actions] : rules) {
      u.rules.push_back(AclRule{*ParseResourcePattern(res), actions, Decision::kAllow});
    }
    return u;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<AuthStore> store_;
};

TEST_F(AuthStoreReplaceTest, StoreHoldsExactlyTheGivenUsersAndRulesAfterAReopen) {
  ASSERT_TRUE(store_->CreateUser(User{"local-only", "secret-0", UserType::kNormal, true}).ok());
  ASSERT_TRUE(store_->CreateUser(User{"alice", "old-secret", UserType::kNormal, true}).ok());
  ASSERT_TRUE(store_->Grant("alice", AclRule{*ParseResourcePattern("topic:gone"), kPub,
                                              Decision::kAllow})
                  .ok());
  auto changed = store_->ReplaceAll({Entry("alice", "new-secret", {{"topic:orders", kPub}}),
                                     Entry("root", "root-secret", {}, UserType::kSuper)});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 3);  // local-only removed, alice changed, root added
  Reopen();
  EXPECT_FALSE(store_->GetUser("local-only").has_value());
  ASSERT_TRUE(store_->GetUser("alice").has_value());
  EXPECT_EQ(store_->GetUser("alice")->secret_key, "new-secret");
  EXPECT_EQ(store_->GetUser("root")->type, UserType::kSuper);
  auto rules = store_->ListRules("alice")["alice"];
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].resource.ToString(), "topic:orders");
  EXPECT_TRUE(store_->Allows("alice", Resource::Topic("orders"), kPub));
  EXPECT_FALSE(store_->Allows("alice", Resource::Topic("gone"), kPub));
  EXPECT_EQ(store_->UserCount(), 2u);
}

TEST_F(AuthStoreReplaceTest, TheSameSetAgainChangesNothingAndARuleChangeCountsItsUser) {
  std::vector<AuthStore::UserWithRules> users = {
      Entry("alice", "secret-1", {{"topic:orders", kPub}, {"group:g", kSub}}),
      Entry("bob", "secret-2", {})};
  ASSERT_EQ(*store_->ReplaceAll(users), 2);
  EXPECT_EQ(*store_->ReplaceAll(users), 0);
  users[0].rules.pop_back();                      // revoke group:g
  users[1].rules = Entry("b", "x", {{"*", kSub}}).rules;  // grant * to bob
  EXPECT_EQ(*store_->ReplaceAll(users), 2);
  EXPECT_FALSE(store_->Allows("alice", Resource::Group("g"), kSub));
  EXPECT_TRUE(store_->Allows("bob", Resource::Group("g"), kSub));
  EXPECT_EQ(*store_->ReplaceAll({}), 2);
  EXPECT_EQ(store_->UserCount(), 0u);
  Reopen();
  EXPECT_EQ(store_->UserCount(), 0u);
  EXPECT_TRUE(store_->ListRules("").empty());
}

TEST_F(AuthStoreReplaceTest, RecallNamingItsTopicNeedsPubOnThatTopicElsePubOnEverything) {
  ASSERT_EQ(*store_->ReplaceAll({Entry("app", "secret-1", {{"topic:orders", kPub}})}), 1);
  proto::Request recall;
  recall.mutable_recall()->set_recall_handle("h");
  EXPECT_EQ(Authorize(*store_, "app", recall).code(), absl::StatusCode::kPermissionDenied);
  recall.mutable_recall()->set_topic("orders");
  EXPECT_EQ(Authorize(*store_, "app", recall).code(), absl::StatusCode::kOk);
  recall.mutable_recall()->set_topic("payments");
  EXPECT_EQ(Authorize(*store_, "app", recall).code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace tokimq::broker::auth
