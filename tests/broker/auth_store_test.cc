// AuthStore over a real RocksDB in a temp dir: users and rules survive a reopen, the record
// codecs refuse damage, the bootstrap creates one super user only when none exists, and the
// permission table / per-connection gate built on it.
#include "broker/auth/auth_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "broker/auth/connection_auth.h"
#include "broker/auth/permissions.h"
#include "proto/auth_proof.h"
#include "test_util.h"

namespace tokimq::broker::auth {
namespace {

class AuthStoreTest : public ::testing::Test {
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
  static User Normal(const std::string& ak, const std::string& sk = "secret-1") {
    return User{ak, sk, UserType::kNormal, true};
  }
  void Grant(const std::string& ak, const std::string& res, ActionSet a,
             Decision d = Decision::kAllow) {
    ASSERT_TRUE(store_->Grant(ak, AclRule{*ParseResourcePattern(res), a, d}).ok());
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<AuthStore> store_;
};

TEST_F(AuthStoreTest, UsersAndRulesSurviveReopen) {
  ASSERT_TRUE(store_->CreateUser(Normal("alice", "alice-secret")).ok());
  ASSERT_TRUE(store_->CreateUser(User{"root", "root-secret", UserType::kSuper, true}).ok());
  Grant("alice", "topic:orders*", kPub | kSub);
  Grant("alice", "group:billing", kSub, Decision::kDeny);
  Reopen();
  std::optional<User> alice = store_->GetUser("alice");
  ASSERT_TRUE(alice.has_value());
  EXPECT_EQ(alice->secret_key, "alice-secret");
  EXPECT_EQ(alice->type, UserType::kNormal);
  EXPECT_TRUE(alice->enabled);
  EXPECT_EQ(store_->GetUser("root")->type, UserType::kSuper);
  auto rules = store_->ListRules("alice")["alice"];
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].resource.ToString(), "group:billing");
  EXPECT_EQ(rules[0].decision, Decision::kDeny);
  EXPECT_EQ(rules[1].resource.ToString(), "topic:orders*");
  EXPECT_EQ(rules[1].actions, kPub | kSub);
}

TEST_F(AuthStoreTest, GrantReplacesTheRuleOfTheSameResourceAndRevokeRemovesIt) {
  ASSERT_TRUE(store_->CreateUser(Normal("alice")).ok());
  Grant("alice", "topic:orders", kPub);
  Grant("alice", "topic:orders", kSub);
  EXPECT_FALSE(store_->Allows("alice", Resource::Topic("orders"), kPub));
  EXPECT_TRUE(store_->Allows("alice", Resource::Topic("orders"), kSub));
  ASSERT_TRUE(store_->Revoke("alice", *ParseResourcePattern("topic:orders")).ok());
  EXPECT_FALSE(store_->Allows("alice", Resource::Topic("orders"), kSub));
  EXPECT_EQ(store_->Revoke("alice", *ParseResourcePattern("topic:orders")).code(),
            absl::StatusCode::kNotFound);
  Reopen();
  EXPECT_TRUE(store_->ListRules("alice")["alice"].empty());
}

TEST_F(AuthStoreTest, SuperBypassesRulesDisabledAndUnknownAreRefused) {
  ASSERT_TRUE(store_->CreateUser(User{"root", "root-secret", UserType::kSuper, true}).ok());
  ASSERT_TRUE(store_->CreateUser(User{"off", "off-secret", UserType::kSuper, false}).ok());
  EXPECT_TRUE(store_->Allows("root", Resource::Cluster(), kAdmin));
  EXPECT_TRUE(store_->Allows("root", Resource::Topic("x"), kPub));
  EXPECT_FALSE(store_->Allows("off", Resource::Topic("x"), kPub));
  EXPECT_FALSE(store_->Allows("nobody", Resource::Topic("x"), kPub));
}

TEST_F(AuthStoreTest, DeleteUserRemovesItsRules) {
  ASSERT_TRUE(store_->CreateUser(Normal("alice")).ok());
  Grant("alice", "*", kPub);
  ASSERT_TRUE(store_->DeleteUser("alice").ok());
  ASSERT_TRUE(store_->CreateUser(Normal("alice")).ok());  // same name again: no old rules
  EXPECT_FALSE(store_->Allows("alice", Resource::Topic("x"), kPub));
  Reopen();  // no orphan rule record left behind (Open refuses those)
  EXPECT_TRUE(store_->ListRules("")["alice"].empty());
  EXPECT_EQ(store_->DeleteUser("ghost").code(), absl::StatusCode::kNotFound);
}

TEST_F(AuthStoreTest, CreateRefusesDuplicatesAndBadKeys) {
  ASSERT_TRUE(store_->CreateUser(Normal("alice")).ok());
  EXPECT_EQ(store_->CreateUser(Normal("alice")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->CreateUser(Normal("a b")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CreateUser(Normal("bob", "123")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store_->Grant("ghost", AclRule{*ParseResourcePattern("*"), kPub, Decision::kAllow}).code(),
      absl::StatusCode::kNotFound);
}

TEST_F(AuthStoreTest, InitialUserIsCreatedOnlyWhenNoUserExists) {
  auto first = store_->CreateInitialUser(User{"root", "root-secret", UserType::kNormal, false});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  EXPECT_EQ(store_->GetUser("root")->type, UserType::kSuper);  // always super, enabled
  EXPECT_TRUE(store_->GetUser("root")->enabled);
  auto again = store_->CreateInitialUser(User{"other", "other-secret", UserType::kSuper, true});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_FALSE(store_->GetUser("other").has_value());
}

TEST(AuthRecordTest, CodecsRefuseDamage) {
  const User u{"alice", "alice-secret", UserType::kNormal, true};
  const std::string v = EncodeUserValue(u);
  ASSERT_EQ(v.size(), 11u + 12u);
  auto back = DecodeUserValue("alice", v);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->secret_key, "alice-secret");
  EXPECT_EQ(DecodeUserValue("alicf", v).status().code(), absl::StatusCode::kDataLoss);  // key
  for (size_t i = 0; i < v.size(); ++i) {
    std::string bad = v;
    bad[i] ^= 0x01;
    EXPECT_EQ(DecodeUserValue("alice", bad).status().code(), absl::StatusCode::kDataLoss) << i;
  }
  for (size_t n = 0; n < v.size(); ++n) {
    EXPECT_FALSE(DecodeUserValue("alice", v.substr(0, n)).ok()) << n;
  }
  const AclRule rule{*ParseResourcePattern("topic:orders*"), kPub, Decision::kDeny};
  const std::string rv = EncodeRuleValue("alice", rule);
  ASSERT_EQ(rv.size(), 7u);
  EXPECT_EQ(*DecodeRuleValue("alice", "topic:orders*", rv), rule);
  EXPECT_FALSE(DecodeRuleValue("alice", "topic:orders", rv).ok());  // CRC covers the resource
  for (size_t i = 0; i < rv.size(); ++i) {
    std::string bad = rv;
    bad[i] ^= 0x01;
    EXPECT_FALSE(DecodeRuleValue("alice", "topic:orders*", bad).ok()) << i;
  }
}

TEST(AuthRecordTest, WorkedExampleOfTheFormatDocument) {  // docs/formats/auth.md
  const User u{"alice", "s3cret-key", UserType::kNormal, true};
  const std::string want_user("\x01\x02\x01\x0a\x00\x00\x00s3cret-key\xb4\xfa\x7a\x95", 21);
  EXPECT_EQ(EncodeUserValue(u), want_user);
  const AclRule rule{*ParseResourcePattern("topic:orders*"), kPub | kSub, Decision::kAllow};
  EXPECT_EQ(EncodeRuleValue("alice", rule), std::string("\x01\x03\x01\xa4\x7f\x1e\x9b", 7));
}

// --- The permission table ---

proto::Request Send(std::initializer_list<const char*> topics) {
  proto::Request r;
  for (const char* t : topics) r.mutable_send()->add_entries()->set_topic(t);
  return r;
}

TEST_F(AuthStoreTest, PermissionTable) {
  ASSERT_TRUE(store_->CreateUser(Normal("app")).ok());
  Grant("app", "topic:orders", kPub);
  Grant("app", "topic:events", kSub);
  Grant("app", "group:billing", kSub);
  auto code = [&](const proto::Request& r) { return Authorize(*store_, "app", r).code(); };
  const auto ok = absl::StatusCode::kOk, denied = absl::StatusCode::kPermissionDenied;
  EXPECT_EQ(code(Send({"orders"})), ok);
  EXPECT_EQ(code(Send({"orders", "events"})), denied);  // every entry's topic needs pub
  proto::Request recv;
  recv.mutable_receive()->set_group("billing");
  recv.mutable_receive()->set_topic("events");
  EXPECT_EQ(code(recv), ok);
  recv.mutable_receive()->set_topic("orders");  // pub only on orders: no sub
  EXPECT_EQ(code(recv), denied);
  recv.mutable_receive()->set_topic("events");
  recv.mutable_receive()->set_group("audit");  // sub on the topic, not the group
  EXPECT_EQ(code(recv), denied);
  proto::Request ack;
  ack.mutable_ack()->set_group("billing");
  EXPECT_EQ(code(ack), ok);
  proto::Request nack;
  nack.mutable_nack()->set_group("audit");
  EXPECT_EQ(code(nack), denied);
  proto::Request describe;
  describe.mutable_describe_topic()->set_name("orders");  // pub or sub (route)
  EXPECT_EQ(code(describe), ok);
  proto::Request create;
  create.mutable_create_topic()->mutable_topic()->set_name("orders");  // admin
  EXPECT_EQ(code(create), denied);
  proto::Request clock;
  clock.mutable_advance_clock()->set_advance_ms(1);
  EXPECT_EQ(code(clock), denied);
  proto::Request users;
  users.mutable_list_users();
  EXPECT_EQ(code(users), denied);
  proto::Request stats;
  stats.mutable_stats();
  EXPECT_EQ(code(stats), ok);  // any authenticated user; filtered
  Grant("app", "*", kAdmin);
  EXPECT_EQ(code(create), ok);
  EXPECT_EQ(code(users), ok);
}

TEST_F(AuthStoreTest, StatsAndTopicListAreFilteredToWhatTheUserMaySee) {
  ASSERT_TRUE(store_->CreateUser(Normal("app")).ok());
  Grant("app", "topic:orders", kPub);
  Grant("app", "group:billing", kSub);
  proto::Request req;
  req.mutable_stats();
  proto::Response resp;
  for (const char* t : {"events", "orders", "secret"})
    resp.mutable_stats()->add_topics()->set_name(t);
  for (const char* g : {"audit", "billing"}) resp.mutable_stats()->add_groups()->set_group(g);
  FilterResponse(*store_, "app", req, &resp);
  ASSERT_EQ(resp.stats().topics_size(), 1);
  EXPECT_EQ(resp.stats().topics(0).name(), "orders");
  ASSERT_EQ(resp.stats().groups_size(), 1);
  EXPECT_EQ(resp.stats().groups(0).group(), "billing");
  proto::Request list;
  list.mutable_list_topics();
  proto::Response topics;
  for (const char* t : {"events", "orders"})
    topics.mutable_list_topics()->add_topics()->set_name(t);
  FilterResponse(*store_, "app", list, &topics);
  ASSERT_EQ(topics.list_topics().topics_size(), 1);
  EXPECT_EQ(topics.list_topics().topics(0).name(), "orders");
}

// --- The native handshake: authentication and replay ---

class ConnectionAuthTest : public AuthStoreTest {
 protected:
  // A handshake on a fresh connection; returns the nonce the broker sent.
  std::string Handshake(ConnectionAuth* conn, const std::string& client_id = "cli-1") {
    proto::HandshakeRequest req;
    req.set_client_id(client_id);
    proto::HandshakeResponse resp;
    conn->OnHandshake(req, &resp);
    EXPECT_TRUE(resp.auth_required());
    EXPECT_EQ(resp.auth_nonce().size(), wire::kAuthNonceBytes);
    return resp.auth_nonce();
  }
  static proto::AuthenticateRequest Proof(const std::string& ak, const std::string& sk,
                                          const std::string& nonce,
                                          const std::string& client_id = "cli-1") {
    proto::AuthenticateRequest r;
    r.set_access_key(ak);
    r.set_signature(wire::AuthProof(sk, nonce, client_id));
    return r;
  }
};

TEST_F(ConnectionAuthTest, RightProofAuthenticatesAndRequestsAreThenAuthorized) {
  ASSERT_TRUE(store_->CreateUser(Normal("app", "app-secret")).ok());
  Grant("app", "topic:orders", kPub);
  ConnectionAuth conn(store_.get());
  proto::Request send = Send({"orders"});
  EXPECT_EQ(conn.Admit(send).code(), absl::StatusCode::kUnauthenticated);
  const std::string nonce = Handshake(&conn);
  EXPECT_EQ(conn.Admit(send).code(), absl::StatusCode::kUnauthenticated);
  proto::AuthenticateResponse resp;
  ASSERT_TRUE(conn.Authenticate(Proof("app", "app-secret", nonce), &resp).ok());
  EXPECT_EQ(resp.access_key(), "app");
  EXPECT_FALSE(resp.super_user());
  EXPECT_TRUE(conn.Admit(send).ok());
  EXPECT_EQ(conn.Admit(Send({"events"})).code(), absl::StatusCode::kPermissionDenied);
  // A revoked rule applies at the next request of an open connection.
  ASSERT_TRUE(store_->Revoke("app", *ParseResourcePattern("topic:orders")).ok());
  EXPECT_EQ(conn.Admit(send).code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(ConnectionAuthTest, ProofOfOneConnectionIsRefusedOnAnother) {
  ASSERT_TRUE(store_->CreateUser(Normal("app", "app-secret")).ok());
  ConnectionAuth first(store_.get());
  const std::string nonce1 = Handshake(&first);
  const proto::AuthenticateRequest recorded = Proof("app", "app-secret", nonce1);
  proto::AuthenticateResponse resp;
  ASSERT_TRUE(first.Authenticate(recorded, &resp).ok());
  // An eavesdropper replays the recorded proof on a new connection: fresh nonce, refused.
  ConnectionAuth second(store_.get());
  const std::string nonce2 = Handshake(&second);
  EXPECT_NE(nonce1, nonce2);
  EXPECT_EQ(second.Authenticate(recorded, &resp).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_FALSE(second.authenticated());
}

TEST_F(ConnectionAuthTest, OneAttemptPerNonce) {
  ASSERT_TRUE(store_->CreateUser(Normal("app", "app-secret")).ok());
  ConnectionAuth conn(store_.get());
  const std::string nonce = Handshake(&conn);
  proto::AuthenticateResponse resp;
  EXPECT_EQ(conn.Authenticate(Proof("app", "wrong-secret", nonce), &resp).code(),
            absl::StatusCode::kUnauthenticated);
  // The right proof after a wrong one: the nonce is spent.
  EXPECT_EQ(conn.Authenticate(Proof("app", "app-secret", nonce), &resp).code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(ConnectionAuthTest, WrongClientIdUnknownOrDisabledUserAndNoHandshakeFail) {
  ASSERT_TRUE(store_->CreateUser(Normal("app", "app-secret")).ok());
  ASSERT_TRUE(store_->CreateUser(User{"off", "off-secret", UserType::kNormal, false}).ok());
  proto::AuthenticateResponse resp;
  {
    ConnectionAuth conn(store_.get());
    const std::string nonce = Handshake(&conn, "cli-1");
    EXPECT_FALSE(conn.Authenticate(Proof("app", "app-secret", nonce, "cli-2"), &resp).ok());
  }
  {
    ConnectionAuth conn(store_.get());
    const std::string nonce = Handshake(&conn);
    EXPECT_FALSE(conn.Authenticate(Proof("ghost", "app-secret", nonce), &resp).ok());
  }
  {
    ConnectionAuth conn(store_.get());
    const std::string nonce = Handshake(&conn);
    EXPECT_FALSE(conn.Authenticate(Proof("off", "off-secret", nonce), &resp).ok());
  }
  {
    ConnectionAuth conn(store_.get());  // no handshake: no nonce
    EXPECT_FALSE(conn.Authenticate(Proof("app", "app-secret", ""), &resp).ok());
  }
}

TEST_F(ConnectionAuthTest, AuthOffAdmitsEverythingAndSendsNoNonce) {
  ConnectionAuth conn(nullptr);
  proto::HandshakeRequest hreq;
  proto::HandshakeResponse hresp;
  conn.OnHandshake(hreq, &hresp);
  EXPECT_FALSE(hresp.auth_required());
  EXPECT_TRUE(hresp.auth_nonce().empty());
  proto::Request clock;
  clock.mutable_advance_clock()->set_advance_ms(1);
  EXPECT_TRUE(conn.Admit(clock).ok());
}

// AuthStore::ReplaceAll (cluster mode mirrors etcd's users and rules into the store: issue 19
// item 3) and the permission of a recall naming its topic, on the same store fixture.
class AuthStoreReplaceTest : public AuthStoreTest {
 protected:
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
