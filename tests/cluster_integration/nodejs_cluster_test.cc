// The official RocketMQ Node.js client (rocketmq-client-nodejs@1.0.8) against etcd + three
// tokimq brokers with their gRPC endpoints on (issue 19 items 6 and 9): this harness starts the
// cluster (tests/support/cluster_processes.h), creates the topics
// and runs tests/rocketmq/rocketmq_cluster.test.js with node, which checks the routes and sends,
// delays, receives and acks across the brokers. Skipped when node, the npm-installed client
// (build/_rocketmq_npm) or the RocketMQ endpoint is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "client/admin.h"
#include "support/cluster_processes.h"
#include "support/ports.h"
#include "support/run_command.h"

namespace tokimq {
namespace {

using client::AdminClient;
using testing::PickFreePort;

class NodeJsClusterTest : public testing::ClusterProcessTest {
 protected:
  void SetUp() override {
    if (!TOKIMQ_HAVE_ROCKETMQ) GTEST_SKIP() << "broker built without the RocketMQ endpoint";
    if (::access(TOKIMQ_NODE_BIN, X_OK) != 0) GTEST_SKIP() << "node not found";
    if (::access(ClientDir().c_str(), R_OK) != 0) GTEST_SKIP() << ClientDir() << " missing";
    ASSERT_NO_FATAL_FAILURE(ClusterProcessTest::SetUp());
    // The PushConsumer's shutdown waits for its open long polls: keep them short.
    const std::string config = dir_.Join("broker.toml");
    std::ofstream(config) << "max_long_poll = \"5s\"\n";
    for (int i = 0; i < 3; ++i) {
      const std::string name = "b" + std::to_string(i);
      const int grpc_port = PickFreePort();
      grpc_.push_back("127.0.0.1:" + std::to_string(grpc_port));
      std::vector<std::string> args = MemberArgs(name);
      args.insert(args.begin(), {"--config", config});
      args.insert(args.end(),
                  {"--grpc-port", std::to_string(grpc_port), "--timer-precision", "100ms"});
      ASSERT_TRUE(AddBroker(name, std::move(args)));
    }
    ASSERT_TRUE(AwaitMembers(3));
  }

  static std::string ClientDir() {
    return std::string(TOKIMQ_ROCKETMQ_NPM_DIR) + "/node_modules/rocketmq-client-nodejs";
  }

  // Messages stored in `topic` on broker i (sum of its queues' max offsets).
  int64_t Stored(int i, const std::string& topic) {
    auto d = AdminClient(Options(i)).DescribeTopic(topic);
    if (!d.ok()) return -1;
    int64_t n = 0;
    for (const proto::QueueInfo& q : d->queues()) n += q.max_offset();
    return n;
  }

  std::vector<std::string> grpc_;
};

TEST_F(NodeJsClusterTest, OfficialClientSendsDelaysReceivesAndAcksAcrossThreeBrokers) {
  CreateTopic("rmq_c_delay", proto::DELAY, 2);
  CreateTopic("rmq_c_push", proto::NORMAL, 2);
  CreateTopic("rmq_c_pair", proto::NORMAL, 1, {"b0", "b1"});
  std::string json = "[";
  for (size_t i = 0; i < brokers_.size(); ++i) {
    // Appended piece by piece: GCC 12 -O3 reports a false -Wrestrict on "..." + std::string.
    if (i > 0) json += ",";
    json += "{\"name\":\"b";
    json += std::to_string(i);
    json += "\",\"native\":\"";
    json += brokers_[i]->Options().broker;
    json += "\",\"grpc\":\"";
    json += grpc_[i];
    json += "\"}";
  }
  json += "]";
  ::setenv("TOKIMQ_CLUSTER_BROKERS", json.c_str(), 1);
  ::setenv("NODE_PATH", (std::string(TOKIMQ_ROCKETMQ_NPM_DIR) + "/node_modules").c_str(), 1);
  const testing::CommandResult node =
      testing::RunShell(std::string(TOKIMQ_NODE_BIN) + " --test --test-reporter=spec " +
                        TOKIMQ_SOURCE_DIR + "/tests/rocketmq/rocketmq_cluster.test.js 2>&1");
  std::printf("%s", node.out.c_str());
  ASSERT_EQ(node.exit_code, 0) << "node test failed (output above)";
  // Seen from the brokers: every one of them stored some of the Node.js client's messages.
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(Stored(i, "rmq_c_delay"), 0) << "b" << i;
    EXPECT_GT(Stored(i, "rmq_c_push"), 0) << "b" << i;
  }
  EXPECT_EQ(Stored(2, "rmq_c_pair"), 0) << "b2 does not host rmq_c_pair";
}

}  // namespace
}  // namespace tokimq
