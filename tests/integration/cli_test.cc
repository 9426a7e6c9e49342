// The `tokimq` CLI against a real broker: output, exit codes, one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "broker_process.h"
#include "support/run_command.h"
#include "test_util.h"

namespace tokimq {
namespace {

using RunResult = testing::CommandResult;  // out: stdout and stderr

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<testing::BrokerProcess>(dir_.Join("data"));
    ASSERT_TRUE(broker_->Start());
  }
  RunResult Run(const std::string& args, const std::string& stdin_text = "") {
    std::string input = dir_.Join("stdin.txt");
    FILE* f = std::fopen(input.c_str(), "w");
    std::fputs(stdin_text.c_str(), f);
    std::fclose(f);
    std::string cmd = std::string(TOKIMQ_CLI_BIN) + " --broker 127.0.0.1:" +
                      std::to_string(broker_->port()) + " " + args + " <" + input + " 2>&1";
    return testing::RunShell(cmd);
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<testing::BrokerProcess> broker_;
};

TEST_F(CliTest, CreateSendAdvanceConsume) {
  RunResult r = Run("topic create --name orders.timeout --type delay --queues 4 --max-delay 7d");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("max_delay=7d"), std::string::npos) << r.out;
  r = Run("send --topic orders.timeout --delay 30m --key o-1 --body cancel-o-1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("recall="), std::string::npos) << r.out;
  // A delayed message has no queue offset until the timer releases it.
  EXPECT_NE(r.out.find(" queue="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" offset="), std::string::npos) << r.out;
  r = Run("send --topic orders.timeout --delay 30m -q", "a\nb\nc\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("sent 3 of 3 messages"), std::string::npos) << r.out;
  r = Run("consume --group g --topic orders.timeout --wait 300ms --count 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("received 0 messages"), std::string::npos) << r.out;
  ASSERT_EQ(Run("admin advance-clock 30m").exit_code, 0);
  r = Run("consume --group g --topic orders.timeout --wait 5s --count 4 --ack");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("cancel-o-1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("received 4 messages (acked)"), std::string::npos) << r.out;
  r = Run("stats");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("depth=4"), std::string::npos) << r.out;
  // --props prints the properties, a line each, control bytes escaped.
  r = Run("send --topic orders.timeout -p color=blue -p \"note=a b\" --body with-props");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(" offset="), std::string::npos) << r.out;  // immediate: its queue offset
  EXPECT_EQ(r.out.find("recall="), std::string::npos) << r.out;
  r = Run("consume --group p --topic orders.timeout --wait 5s --count 5 --ack --props");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\n  prop color=blue\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  prop note=a b\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  prop UNIQ_KEY="), std::string::npos) << r.out;
}

// The message limits (docs/protocol.md "Message limits") hold for the CLI too, with the limit
// named.
TEST_F(CliTest, SendOverAMessageLimitFailsNamingIt) {
  ASSERT_EQ(Run("topic create --name lim --type normal --queues 1").exit_code, 0);
  RunResult r = Run("send --topic lim --key " + std::string(16'385, 'k') + " --body x");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("key of 16385 bytes exceeds the limit of 16384 bytes"), std::string::npos)
      << r.out;
  r = Run("send --topic lim --tag " + std::string(20'000, 't') + " --body x");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("tag of 20000 bytes exceeds"), std::string::npos) << r.out;
  r = Run("send --topic lim --key " + std::string(16'384, 'k') + " --body at-the-limit");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = Run("stats");
  EXPECT_NE(r.out.find("depth=1"), std::string::npos) << r.out;
}

TEST_F(CliTest, FifoTopicWithMessageGroups) {
  ASSERT_EQ(Run("topic create --name pay --type fifo --queues 2").exit_code, 0);
  RunResult r = Run("send --topic pay --body x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("needs a message group"), std::string::npos) << r.out;
  r = Run("send --topic pay --message-group order-7 -q", "created\npaid\nshipped\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // Consumed without acks: the group's next message stays back while its head is leased.
  r = Run("consume --group g --topic pay --wait 300ms --count 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("group=order-7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\tcreated"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("paid"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("received 1 message"), std::string::npos) << r.out;
  // Another consumer group starts from the head and, acking, gets the group in order.
  r = Run("consume --group h --topic pay --wait 300ms --count 3 --ack");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t a = r.out.find("\tcreated"), b = r.out.find("\tpaid"), c = r.out.find("\tshipped");
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos) << r.out;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  // Lines from stdin keep their order in a FIFO topic even across many small requests.
  std::string lines;
  for (int i = 0; i < 200; ++i) lines += "line-" + std::to_string(i) + "\n";
  r = Run("send --topic pay --message-group bulk --batch 4 -q", lines);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = Run("consume --group bulk-reader --topic pay --wait 300ms --count 203 --ack");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  size_t at = 0;
  for (int i = 0; i < 200; ++i) {
    size_t next = r.out.find("\tline-" + std::to_string(i) + "\n", at);
    ASSERT_NE(next, std::string::npos) << "line-" << i << " missing or out of order";
    at = next;
  }
}

// The handle=... field of a consume line.
std::string HandleOf(const std::string& out) {
  const size_t at = out.find("handle=");
  if (at == std::string::npos) return "";
  return out.substr(at + 7, out.find_first_of(" \t\n", at) - at - 7);
}

TEST_F(CliTest, AckNackRenewByHandle) {
  ASSERT_EQ(Run("topic create --name jobs --type normal --queues 1").exit_code, 0);
  ASSERT_EQ(Run("send --topic jobs --body job-1").exit_code, 0);
  RunResult r = Run("consume --group w --topic jobs --wait 300ms --invisible 30s");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::string h = HandleOf(r.out);
  ASSERT_FALSE(h.empty()) << r.out;
  // Renew: a new handle, the old one is stale.
  r = Run("renew --group w --invisible 10m " + h);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string renewed = HandleOf(r.out);
  ASSERT_FALSE(renewed.empty()) << r.out;
  r = Run("ack --group w " + h);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("not acked"), std::string::npos) << r.out;
  // Nack with no delay: back at once as attempt 2.
  ASSERT_EQ(Run("nack --group w --delay 0s " + renewed).exit_code, 0);
  r = Run("consume --group w --topic jobs --wait 2s");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("attempt=2"), std::string::npos) << r.out;
  r = Run("ack --group w " + HandleOf(r.out));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("acked "), std::string::npos) << r.out;
  r = Run("consume --group w --topic jobs --wait 300ms --count 0");
  EXPECT_NE(r.out.find("received 0 messages"), std::string::npos) << r.out;
}

TEST_F(CliTest, FailuresExitNonZeroWithOneLine) {
  ASSERT_EQ(Run("topic create --name t --type delay --max-delay 1d").exit_code, 0);
  RunResult r = Run("send --topic t --delay 2d --body x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "tokimq: delay 2d exceeds the max delay 1d of topic 't'\n");
  r = Run("send --topic missing --body x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "tokimq: topic 'missing' does not exist\n");
  r = Run("send --topic t --delay soon --body x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(Run("topic bogus").exit_code, 0);
  EXPECT_EQ(Run("--help").exit_code, 0);
  EXPECT_EQ(Run("send --help").exit_code, 0);
}

}  // namespace
}  // namespace tokimq
