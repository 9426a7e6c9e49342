// Authentication and ACLs on the real broker (--auth) through the real `tokimq` CLI and the
// C++ client: bootstrap user, users and rules created with the CLI, each refusal's code.
#include <gtest/gtest.h>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "support/run_command.h"
#include "test_util.h"

namespace tokimq {
namespace {

using RunResult = testing::CommandResult;  // out: stdout and stderr

class AuthCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<testing::BrokerProcess>(
        dir_.Join("data"), std::vector<std::string>{"--manual-clock", "--auth", "--auth-init-user",
                                                    "root:root-secret"});
    ASSERT_TRUE(broker_->Start());
  }
  // Credentials through the environment; ak "" for none.
  RunResult Run(const std::string& args, const std::string& ak = "root",
                const std::string& sk = "root-secret") {
    std::string env =
        ak.empty() ? "" : "TOKIMQ_ACCESS_KEY=" + ak + " TOKIMQ_SECRET_KEY=" + sk + " ";
    std::string cmd = env + std::string(TOKIMQ_CLI_BIN) +
                      " --broker 127.0.0.1:" + std::to_string(broker_->port()) + " " + args +
                      " </dev/null 2>&1";
    return testing::RunShell(cmd);
  }
  client::ClientOptions As(const std::string& ak, const std::string& sk) {
    client::ClientOptions o = broker_->Options();
    o.access_key = ak;
    o.secret_key = sk;
    return o;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<testing::BrokerProcess> broker_;
};

TEST_F(AuthCliTest, WithoutOrWithWrongCredentialsEverythingIsRefused) {
  RunResult r = Run("topic list", "");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("requires authentication"), std::string::npos) << r.out;
  r = Run("topic list", "root", "not-the-secret");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("authentication failed"), std::string::npos) << r.out;
  r = Run("topic list", "ghost", "root-secret");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("authentication failed"), std::string::npos) << r.out;
  // The C++ client reports the codes.
  client::AdminClient anonymous(broker_->Options());
  EXPECT_EQ(anonymous.ListTopics().status().code(), absl::StatusCode::kUnauthenticated);
  client::AdminClient wrong(As("root", "wrong-secret"));
  EXPECT_EQ(wrong.ListTopics().status().code(), absl::StatusCode::kUnauthenticated);
  // Flags work as well as the environment.
  r = Run("--access-key root --secret-key root-secret topic list", "");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(AuthCliTest, UsersAndRulesThroughTheCli) {
  ASSERT_EQ(Run("topic create --name orders --type delay").exit_code, 0);
  ASSERT_EQ(Run("topic create --name secrets").exit_code, 0);
  RunResult r = Run("user create --access-key app --secret-key app-secret");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("created user app (normal)"), std::string::npos) << r.out;
  r = Run("user list");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("app type=normal enabled=true"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("root type=super enabled=true"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("secret"), std::string::npos) << r.out;  // never prints secrets

  // No rule yet: authenticated, but refused.
  r = Run("send --topic orders --delay 1m --body x", "app", "app-secret");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("has no pub permission on topic:orders"), std::string::npos) << r.out;

  ASSERT_EQ(Run("acl grant --user app --resource topic:ord* --actions pub,sub").exit_code, 0);
  ASSERT_EQ(Run("acl grant --user app --resource group:billing --actions sub").exit_code, 0);
  r = Run("acl list --user app");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("app group:billing sub allow"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("app topic:ord* pub,sub allow"), std::string::npos) << r.out;

  r = Run("send --topic orders --body now", "app", "app-secret");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = Run("send --topic secrets --body x", "app", "app-secret");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  r = Run("consume --group billing --topic orders --wait 2s --ack", "app", "app-secret");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("now"), std::string::npos) << r.out;
  r = Run("consume --group audit --topic orders --wait 100ms", "app", "app-secret");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("group:audit"), std::string::npos) << r.out;
  // Admin requests need admin on "*".
  r = Run("topic delete orders", "app", "app-secret");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  r = Run("user create --access-key evil --secret-key evil-secret --super", "app", "app-secret");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("admin permission on cluster"), std::string::npos) << r.out;
  // Topic list and stats show only what the user may see.
  r = Run("topic list", "app", "app-secret");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("orders"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("secrets"), std::string::npos) << r.out;

  // A deny at the exact level beats the prefix allow.
  ASSERT_EQ(Run("acl grant --user app --resource topic:orders --actions pub --deny").exit_code, 0);
  EXPECT_EQ(Run("send --topic orders --body x", "app", "app-secret").exit_code, 1);
  ASSERT_EQ(Run("acl revoke --user app --resource topic:orders").exit_code, 0);
  EXPECT_EQ(Run("send --topic orders --body x", "app", "app-secret").exit_code, 0);

  // Deleting the user ends its access, on open connections too.
  client::Producer producer(As("app", "app-secret"));
  client::OutgoingMessage e;
  e.topic = "orders";
  e.body = "p";
  ASSERT_TRUE(producer.Send(e).ok());
  ASSERT_EQ(Run("user delete --access-key app").exit_code, 0);
  EXPECT_EQ(producer.Send(e).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Run("topic list", "app", "app-secret").exit_code, 1);
}

TEST_F(AuthCliTest, BootstrapUserIsCreatedOnceAndSurvivesRestart) {
  ASSERT_EQ(Run("user create --access-key ops --secret-key ops-secret --super").exit_code, 0);
  ASSERT_EQ(broker_->Stop(), 0);
  // Restart with another init user: users exist, so it is not created.
  broker_ = std::make_unique<testing::BrokerProcess>(
      dir_.Join("data"), std::vector<std::string>{"--manual-clock", "--auth", "--auth-init-user",
                                                  "other:other-secret"});
  ASSERT_TRUE(broker_->Start());
  EXPECT_EQ(Run("topic list", "ops", "ops-secret").exit_code, 0);
  EXPECT_EQ(Run("topic list", "other", "other-secret").exit_code, 1);
}

TEST(AuthOffTest, CredentialsAreNotNeededWithoutAuth) {
  tokimq::testing::TempDir dir;
  testing::BrokerProcess broker(dir.Join("data"));
  ASSERT_TRUE(broker.Start());
  client::ClientOptions o = broker.Options();
  o.access_key = "whoever";  // ignored: the broker asks for no proof
  o.secret_key = "whatever-secret";
  auto topics = client::AdminClient(o).ListTopics();
  EXPECT_TRUE(topics.ok()) << topics.status();
}

}  // namespace
}  // namespace tokimq
