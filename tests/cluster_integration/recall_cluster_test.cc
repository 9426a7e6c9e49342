// Recall across the brokers of a cluster (issue 19): etcd + three real tokimq-broker processes
// with --auth. Native: the routing clients (ClusterProducer, `tokimq recall`) send a
// "<broker>|<handle>" recall to the broker that issued it; a broker given another broker's
// handle names the owner; its own is served. gRPC: the official Node.js client recalls through
// its access point and that broker forwards to the owner as the calling user
// (tests/rocketmq/rocketmq_cluster_recall.test.js; skipped without node or the endpoint).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/admin.h"
#include "client/cluster_producer.h"
#include "client/producer.h"
#include "cluster/etcd_process.h"
#include "integration/broker_process.h"
#include "support/await.h"
#include "support/run_command.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::AdminClient;
using client::ClientOptions;
using testing::BrokerProcess;
using testing::EtcdProcess;
using testing::PickFreePort;
using testing::TempDir;

constexpr char kRoot[] = "root";
constexpr char kRootSecret[] = "root-secret-1";

class RecallClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start()) << "etcd did not start (etcd-server installed?)";
    const std::string config = dir_.Join("broker.toml");
    std::ofstream(config) << "max_long_poll = \"5s\"\n";
    for (int i = 0; i < 3; ++i) {
      const std::string name = "b" + std::to_string(i);
      grpc_.push_back("127.0.0.1:" + std::to_string(PickFreePort()));
      brokers_.push_back(std::make_unique<BrokerProcess>(
          dir_.Join(name),
          std::vector<std::string>{"--config", config, "--cluster", "c1", "--etcd-endpoints",
                                   etcd_.endpoint(), "--broker-name", name, "--grpc-port",
                                   grpc_.back().substr(grpc_.back().rfind(':') + 1),
                                   "--timer-precision", "100ms", "--auth", "--auth-init-user",
                                   std::string(kRoot) + ":" + kRootSecret}));
      ASSERT_TRUE(brokers_.back()->Start()) << name;
    }
    ASSERT_TRUE(testing::AwaitTrue(
        [&] {
          for (int i = 0; i < 3; ++i) {
            auto st = AdminClient(Root(i)).ClusterStatus();
            if (!st.ok() || st->members_size() != 3 || !st->registered()) return false;
          }
          return true;
        },
        std::chrono::seconds(30), "3 registered members on every broker"));
    CreateTopic("rc_delay");
    CreateTopic("rc_other");
  }

  ClientOptions Root(int i) {
    ClientOptions o = brokers_[i]->Options();
    o.access_key = kRoot;
    o.secret_key = kRootSecret;
    return o;
  }
  ClientOptions AllBrokers() {
    ClientOptions o = Root(0);
    o.broker = Root(0).broker + "," + Root(1).broker + "," + Root(2).broker;
    return o;
  }
  void CreateTopic(const std::string& name) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(proto::DELAY);
    t.set_queues(1);
    auto created = AdminClient(Root(0)).CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(testing::AwaitTrue([&] { return AdminClient(Root(i)).DescribeTopic(name).ok(); },
                                     std::chrono::seconds(30), "topic " + name + " applied"))
          << i;
    }
  }
  int64_t Recalled(int i) {
    auto st = AdminClient(Root(i)).Stats();
    return st.ok() ? st->timer().recalled() : -1;
  }

  TempDir dir_;
  EtcdProcess etcd_{dir_.Join("etcd")};
  std::vector<std::unique_ptr<BrokerProcess>> brokers_;
  std::vector<std::string> grpc_;
};

TEST_F(RecallClusterTest, NativeRecallGoesToTheIssuingBrokerAndAnotherBrokerNamesIt) {
  client::ClusterProducer producer(AllBrokers());
  std::vector<std::string> handles;
  std::map<std::string, std::vector<std::string>> by_broker;
  for (int i = 0; i < 9; ++i) {
    client::OutgoingMessage m;
    m.topic = "rc_delay";
    m.body = "m" + std::to_string(i);
    m.delay_ms = 120'000;
    auto r = producer.Send(m);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->recall_handle.rfind(r->broker + "|", 0), 0u) << r->recall_handle;
    by_broker[r->broker].push_back(r->recall_handle);
  }
  ASSERT_EQ(by_broker.size(), 3u) << "the sends reached every broker";
  const std::string b1_handle = by_broker["b1"][0];

  // A plain (non-routing) client at b0 with b1's handle: refused, naming b1 and its address.
  absl::Status s = client::Producer(Root(0)).Recall(b1_handle);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("issued by broker 'b1' (at "), std::string::npos) << s;
  // At b1 with its own name in front: served.
  ASSERT_TRUE(client::Producer(Root(1)).Recall(b1_handle).ok());
  // The routing clients: the CLI through b2 and the ClusterProducer send each to its owner.
  const std::string cli = std::string(TOKIMQ_CLI_BIN) + " --broker " + Root(2).broker +
                          " --access-key " + kRoot + " --secret-key " + kRootSecret + " recall ";
  const testing::CommandResult cli_recall = testing::RunShell(cli + "'" + by_broker["b0"][0] + "' 2>&1");
  EXPECT_EQ(cli_recall.exit_code, 0) << cli_recall.out;
  EXPECT_NE(cli_recall.out.find("recalled"), std::string::npos) << cli_recall.out;
  EXPECT_TRUE(producer.Recall(by_broker["b2"][0]).ok());
  EXPECT_TRUE(producer.Recall(by_broker["b0"][1]).ok());
  // Again: the owner says so.
  EXPECT_NE(testing::RunShell(cli + "'" + b1_handle + "' 2>&1").exit_code, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(producer.Recall(b1_handle)));
  EXPECT_EQ(Recalled(0), 2);
  EXPECT_EQ(Recalled(1), 1);
  EXPECT_EQ(Recalled(2), 1);
}

TEST_F(RecallClusterTest, OfficialNodeClientRecallsThroughItsAccessPointOnEveryBroker) {
  if (!TOKIMQ_HAVE_ROCKETMQ) GTEST_SKIP() << "broker built without the RocketMQ endpoint";
  if (::access(TOKIMQ_NODE_BIN, X_OK) != 0) GTEST_SKIP() << "node not found";
  const std::string client_dir =
      std::string(TOKIMQ_ROCKETMQ_NPM_DIR) + "/node_modules/rocketmq-client-nodejs";
  if (::access(client_dir.c_str(), R_OK) != 0) GTEST_SKIP() << client_dir << " missing";
  // A normal user made through b0 (users are cluster-wide): pub on both topics, sub on the
  // topic and the group. The recalls b0 forwards run as this user on b1 and b2.
  proto::CreateUserRequest u;
  u.set_access_key("app");
  u.set_secret_key("app-secret-1");
  ASSERT_TRUE(AdminClient(Root(0)).CreateUser(u).ok());
  for (const auto& [res, actions] : std::vector<std::pair<std::string, std::string>>{
           {"topic:rc_*", "pub,sub"}, {"group:g_rc", "sub"}}) {
    proto::AclRuleInfo r;
    r.set_access_key("app");
    r.set_resource(res);
    r.set_actions(actions);
    ASSERT_TRUE(AdminClient(Root(0)).GrantAcl(r).ok());
  }
  for (int i = 0; i < 3; ++i) {  // every broker has the user and its rules
    ClientOptions app = brokers_[i]->Options();
    app.access_key = "app";
    app.secret_key = "app-secret-1";
    ASSERT_TRUE(testing::AwaitTrue([&] { return AdminClient(app).DescribeTopic("rc_delay").ok(); },
                                   std::chrono::seconds(30), "rc_delay visible to app"))
        << i;
  }

  std::string json = "[";
  for (size_t i = 0; i < brokers_.size(); ++i) {
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
  ::setenv("TOKIMQ_RECALL_CREDENTIALS",
           R"({"accessKey":"app","accessSecret":"app-secret-1"})", 1);
  ::setenv("NODE_PATH", (std::string(TOKIMQ_ROCKETMQ_NPM_DIR) + "/node_modules").c_str(), 1);
  const testing::CommandResult node =
      testing::RunShell(std::string(TOKIMQ_NODE_BIN) + " --test --test-reporter=spec " +
                        TOKIMQ_SOURCE_DIR + "/tests/rocketmq/rocketmq_cluster_recall.test.js 2>&1");
  std::printf("%s", node.out.c_str());
  ASSERT_EQ(node.exit_code, 0) << "node test failed (output above)";
  // Seen from the brokers: each recalled some of its own messages (6 in all).
  int64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(Recalled(i), 0) << "b" << i;
    total += Recalled(i);
  }
  EXPECT_EQ(total, 6);
}

}  // namespace
}  // namespace tokimq
