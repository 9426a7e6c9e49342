// TLS on the native port of the real broker (issue 17): certificates generated here with the
// openssl tool (never committed), the C++ client and the CLI with --tls/--tls-ca, enforcing and
// permissive modes, an untrusted certificate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "support/run_command.h"
#include "test_certificates.h"
#include "test_util.h"

namespace tokimq {
namespace {

using testing::MakeCertificates;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(MakeCertificates(dir_.path())); }
  void StartBroker(const std::string& mode) {
    broker_ = std::make_unique<testing::BrokerProcess>(
        dir_.Join("data"),
        std::vector<std::string>{"--manual-clock", "--tls-cert", dir_.Join("server.pem"),
                                 "--tls-key", dir_.Join("server.key"), "--tls-mode", mode});
    ASSERT_TRUE(broker_->Start());
  }
  client::ClientOptions Tls(const std::string& ca = "ca.pem") {
    client::ClientOptions o = broker_->Options();
    o.tls = true;
    o.tls_ca_file = dir_.Join(ca);
    return o;
  }
  int RunCli(const std::string& args, std::string* out) {
    std::string cmd = std::string(TOKIMQ_CLI_BIN) +
                      " --broker 127.0.0.1:" + std::to_string(broker_->port()) + " " + args +
                      " </dev/null 2>&1";
    testing::CommandResult r = testing::RunShell(cmd);
    out->append(r.out);
    return r.exit_code;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<testing::BrokerProcess> broker_;
};

TEST_F(TlsTest, EnforcingServesTlsClientsAndRefusesPlaintext) {
  StartBroker("enforcing");
  client::AdminClient admin(Tls());
  proto::TopicConfig t;
  t.set_name("secure");
  t.set_type(proto::NORMAL);
  ASSERT_TRUE(admin.CreateTopic(t).ok());
  client::Producer producer(Tls());
  client::OutgoingMessage m;
  m.topic = "secure";
  for (int i = 0; i < 50; ++i) {
    m.body = "body-" + std::to_string(i) + std::string(1000, 'x');  // several TLS records
    ASSERT_TRUE(producer.Send(m).ok());
  }
  client::SimpleConsumer consumer(Tls(), "g");
  int got = 0;
  for (int round = 0; round < 20 && got < 50; ++round) {
    client::ReceiveOptions ro;
    ro.max_messages = 16;
    ro.long_poll_ms = 500;
    auto batch = consumer.Receive("secure", ro);
    ASSERT_TRUE(batch.ok()) << batch.status();
    for (const auto& msg : *batch) {
      EXPECT_EQ(msg.body.substr(0, 5), "body-");
      ASSERT_TRUE(consumer.Ack(msg.receipt_handle).ok());
      ++got;
    }
  }
  EXPECT_EQ(got, 50);
  // Plaintext: the broker reads the handshake as a bad TLS record and closes.
  client::AdminClient plain(broker_->Options());
  EXPECT_FALSE(plain.ListTopics().ok());
  // A certificate the client does not trust.
  client::AdminClient untrusted(Tls("other.pem"));
  auto refused = untrusted.ListTopics();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("certificate"), std::string::npos) << refused.status();
  // The CLI.
  std::string out;
  EXPECT_EQ(RunCli("--tls --tls-ca " + dir_.Join("ca.pem") + " topic list", &out), 0) << out;
  EXPECT_NE(out.find("secure"), std::string::npos) << out;
}

TEST_F(TlsTest, PermissiveServesBothOnOnePort) {
  StartBroker("permissive");
  EXPECT_TRUE(client::AdminClient(Tls()).ListTopics().ok());
  EXPECT_TRUE(client::AdminClient(broker_->Options()).ListTopics().ok());
  std::string out;
  EXPECT_EQ(RunCli("topic list", &out), 0) << out;
  EXPECT_EQ(RunCli("--tls --tls-ca " + dir_.Join("ca.pem") + " topic list", &out), 0) << out;
}

}  // namespace
}  // namespace tokimq
