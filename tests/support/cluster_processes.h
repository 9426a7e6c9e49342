// ClusterProcessTest: the gtest fixture "a real etcd and tokimq-broker processes that use it, on
// loopback, in one temp dir", shared by tests/cluster_integration (brokers b0, b1, ... of one
// cluster) and tests/failover (the replicas of one broker group). The test binary needs the
// TOKIMQ_BROKER_BIN compile definition (integration/broker_process.h).
//
// Lifetime: etcd and every broker belong to the test; the destructor kills them (SIGKILL) and
// removes the temp dir. A broker's data dir is `dir_.Join(name)` and survives Stop/Kill/Start.
// Single-threaded: call from the test body only (the BrokerProcess objects are not
// thread-safe; client calls made through Options(i) are).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "client/admin.h"
#include "integration/broker_process.h"
#include "support/await.h"
#include "support/etcd_test.h"

namespace tokimq::testing {

class ClusterProcessTest : public EtcdTest {
 protected:
  // TOKIMQ_KEEP_FAILED=DIR (environment): a failed test's temp dir (etcd, every broker's data
  // dir and log) is copied to DIR before it goes, for the post-mortem.
  void TearDown() override {
    const char* keep = std::getenv("TOKIMQ_KEEP_FAILED");
    if (HasFailure() && keep != nullptr && *keep != 0) {
      std::error_code ec;
      std::filesystem::copy(dir_.path(), keep, std::filesystem::copy_options::recursive, ec);
      std::printf("kept %s in %s%s\n", dir_.path().c_str(), keep,
                  ec ? (" (" + ec.message() + ")").c_str() : "");
    }
    EtcdTest::TearDown();
  }

  // The flags that make a broker a member of `cluster` in this test's etcd, named `name`.
  std::vector<std::string> MemberArgs(const std::string& name,
                                      const std::string& cluster = "c1") const {
    return {"--cluster", cluster, "--etcd-endpoints", etcd_.endpoint(), "--broker-name", name};
  }

  // Adds broker number brokers_.size() with data dir dir_/<dir_name> and `args`, starts it and
  // waits until it serves (BrokerProcess::Start, 10 s). Use as ASSERT_TRUE(AddBroker(...)); the
  // failure names the broker's log file.
  ::testing::AssertionResult AddBroker(const std::string& dir_name, std::vector<std::string> args) {
    brokers_.push_back(std::make_unique<BrokerProcess>(dir_.Join(dir_name), std::move(args)));
    if (brokers_.back()->Start()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << dir_name << " did not start (log " << brokers_.back()->log_path() << ")";
  }

  client::ClientOptions Options(int i) const { return brokers_[i]->Options(); }

  // Every broker's address, comma-separated: the routing clients' bootstrap list.
  client::ClientOptions AllBrokers() const {
    client::ClientOptions o = Options(0);
    o.broker.clear();
    for (const auto& b : brokers_) o.broker += (o.broker.empty() ? "" : ",") + b->Options().broker;
    return o;
  }

  // Every running broker reports `n` members and itself registered (ClusterStatus).
  ::testing::AssertionResult AwaitMembers(
      int n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return AwaitTrue(
        [&] {
          for (const auto& b : brokers_) {
            if (b->pid() <= 0) continue;
            auto st = client::AdminClient(b->Options()).ClusterStatus();
            if (!st.ok() || st->members_size() != n || !st->registered()) return false;
          }
          return true;
        },
        timeout, std::to_string(n) + " registered members on every broker",
        std::chrono::milliseconds(50));
  }

  // Creates a topic through broker 0 (placed on `on`, every broker when empty) and waits until
  // every host in its placement applied it (DescribeTopic shows `queues` queues there). The
  // placement names brokers by their --broker-name, which must be "b<index in brokers_>".
  void CreateTopic(const std::string& name, proto::TopicType type, int queues,
                   const std::vector<std::string>& on = {}) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(type);
    t.set_queues(queues);
    auto created = client::AdminClient(Options(0)).CreateTopic(t, on);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_EQ(created->placement_size(),
              on.empty() ? static_cast<int>(brokers_.size()) : static_cast<int>(on.size()));
    for (const proto::TopicPlacement& p : created->placement()) {
      const int i = std::stoi(p.broker().substr(1));
      ASSERT_TRUE(AwaitTrue(
          [&] {
            auto d = client::AdminClient(Options(i)).DescribeTopic(name);
            return d.ok() && d->queues_size() == queues;
          },
          std::chrono::seconds(30), "topic " + name + " on " + p.broker(),
          std::chrono::milliseconds(50)));
    }
  }

  std::vector<std::unique_ptr<BrokerProcess>> brokers_;
};

}  // namespace tokimq::testing
