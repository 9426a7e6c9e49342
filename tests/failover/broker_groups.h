// BrokerGroupsTest: the fixture of the fault tests that run one or more broker groups (issue 20)
// as tokimq-broker processes against one etcd (support/cluster_processes.h): AddGroup starts the
// replicas of a group, the helpers find its elected leader, wait until its followers caught up,
// and print the replicas' election / replication log lines after a failure.
//
// A group's replicas are entries of brokers_ (indices in Group::members, broker id = position in
// the group), data dirs "<group>r<id>" in the test's temp dir. Single-threaded: the test body.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/admin.h"
#include "client/producer.h"
#include "support/await.h"
#include "support/cluster_processes.h"

namespace tokimq::testing {

class BrokerGroupsTest : public ClusterProcessTest {
 protected:
  struct Group {
    std::string name;
    std::vector<int> members;  // indices into brokers_; broker id = position
  };

  // Starts a group `name` of `replicas` replicas in ack mode `mode` with lease TTL `ttl_s` and
  // returns its index in groups_. Before a replica starts, `args_hook(broker id, &args)` may
  // change its arguments and `process_hook(broker id, process)` its BrokerProcess settings
  // (network namespace, fixed port). A start that fails fails the test (EXPECT).
  int AddGroup(const std::string& name, int replicas, const std::string& mode = "sync",
               int ttl_s = 2,
               const std::function<void(int, std::vector<std::string>*)>& args_hook = nullptr,
               const std::function<void(int, BrokerProcess*)>& process_hook = nullptr) {
    Group g{name, {}};
    for (int id = 0; id < replicas; ++id) {
      std::vector<std::string> args = MemberArgs(name);
      args.insert(args.end(), {"--broker-id", std::to_string(id), "--replication", mode,
                               "--lease-ttl", std::to_string(ttl_s), "--grpc-port", "0"});
      if (args_hook) args_hook(id, &args);
      const std::string dir = Dir(name, id);
      brokers_.push_back(std::make_unique<BrokerProcess>(dir, args));
      if (process_hook) process_hook(id, brokers_.back().get());
      g.members.push_back(static_cast<int>(brokers_.size()) - 1);
      EXPECT_TRUE(brokers_.back()->Start()) << dir << " did not start (log " << dir << ".log)";
    }
    groups_.push_back(g);
    return static_cast<int>(groups_.size()) - 1;
  }
  std::string Dir(const std::string& group, int id) const {
    return dir_.Join(group + "r" + std::to_string(id));
  }

  // Client options with short timeouts (a dead or cut-off replica answers nothing).
  client::ClientOptions Quick(int i) const {
    client::ClientOptions o = Options(i);
    o.connect_timeout_ms = 500;
    o.request_timeout_ms = 1'000;
    return o;
  }

  // The member of group `g` (a brokers_ index) that reports itself leader of a term newer than
  // `after`, skipping `skip` (a cut-off replica); -1 when none does within 30 s. *term gets its
  // term.
  int WaitLeader(int g, int64_t after, int64_t* term = nullptr, int skip = -1) {
    int found = -1;
    (void)AwaitTrue(
        [&] {
          for (int i : groups_[g].members) {
            if (i == skip || brokers_[i]->pid() <= 0) continue;
            auto gs = client::AdminClient(Quick(i)).GroupStatus();
            if (gs.ok() && gs->role() == "leader" && gs->term() > after) {
              found = i;
              if (term) *term = gs->term();
              return true;
            }
          }
          return false;
        },
        std::chrono::seconds(30), "a leader of " + groups_[g].name, std::chrono::milliseconds(5));
    return found;
  }

  // The current leader of group `g` (any term), -1 when none within 30 s.
  int Leader(int g, int64_t* term = nullptr) { return WaitLeader(g, 0, term); }

  // Every replica of group `g` is running and its CommitLog end equals the leader's, which
  // reports every follower with lag 0 that pulled within the last second. On a timeout prints
  // every replica's view.
  ::testing::AssertionResult CaughtUp(
      int g, std::chrono::milliseconds timeout = std::chrono::seconds(90)) {
    const int followers = static_cast<int>(groups_[g].members.size()) - 1;
    int leader = -1;
    ::testing::AssertionResult ok = AwaitTrue(
        [&] {
          leader = -1;
          int64_t end = -1;
          std::vector<int64_t> ends;
          for (int i : groups_[g].members) {
            auto gs = client::AdminClient(Quick(i)).GroupStatus();
            if (!gs.ok()) return false;
            ends.push_back(gs->max_offset());
            if (gs->role() != "leader") continue;
            leader = i;
            end = gs->max_offset();
            int caught_up = 0;
            for (const proto::FollowerLag& f : gs->followers()) {
              if (f.lag_bytes() == 0 && f.last_pull_ms() < 1'000) ++caught_up;
            }
            if (caught_up != followers) return false;
          }
          if (leader < 0) return false;
          for (int64_t e : ends) {
            if (e != end) return false;
          }
          return true;
        },
        timeout, "the followers of " + groups_[g].name + " caught up",
        std::chrono::milliseconds(5));
    if (!ok) PrintStatus(g);
    return ok;
  }

  // Every replica's group status of group `g`, one line each (a failed wait's evidence).
  void PrintStatus(int g) {
    for (int i : groups_[g].members) {
      auto gs = client::AdminClient(Quick(i)).GroupStatus();
      std::printf("%s replica %d: %s\n", groups_[g].name.c_str(), i,
                  gs.ok() ? gs->ShortDebugString().c_str() : gs.status().ToString().c_str());
    }
  }

  // Under a load that keeps writing, ends are never equal at one probe: every replica of group
  // `g` holds at least the CommitLog end the leader reported at the first probe, and every
  // follower pulled within the last second.
  ::testing::AssertionResult CaughtUpUnderLoad(
      int g, std::chrono::milliseconds timeout = std::chrono::seconds(90)) {
    int64_t target = -1;
    ::testing::AssertionResult ok = AwaitTrue(
        [&] {
          std::vector<int64_t> ends;
          bool pulling = true;
          for (int i : groups_[g].members) {
            auto gs = client::AdminClient(Quick(i)).GroupStatus();
            if (!gs.ok()) return false;
            ends.push_back(gs->max_offset());
            if (gs->role() != "leader") continue;
            if (target < 0) target = gs->max_offset();
            for (const proto::FollowerLag& f : gs->followers()) {
              pulling = pulling && f.last_pull_ms() < 1'000;
            }
          }
          if (target < 0 || !pulling) return false;
          for (int64_t e : ends) {
            if (e < target) return false;
          }
          return true;
        },
        timeout, "the replicas of " + groups_[g].name + " holding the leader's end",
        std::chrono::milliseconds(5));
    if (!ok) PrintStatus(g);
    return ok;
  }

  // On a failure: the last election / replication / error lines of every replica's log (the temp
  // dir goes with the test).
  void DumpLogs() {
    for (const Group& g : groups_) {
      for (size_t id = 0; id < g.members.size(); ++id) {
        const std::string log = Dir(g.name, static_cast<int>(id)) + ".log";
        std::printf("---- %s replica %zu (%s): election / replication / error lines:\n",
                    g.name.c_str(), id, log.c_str());
        std::ifstream in(log);
        std::vector<std::string> lines;
        for (std::string l; std::getline(in, l);) {
          if (l.find("election") != std::string::npos ||
              l.find("replication") != std::string::npos ||
              l.find("group " + g.name) != std::string::npos ||
              l.find("error") != std::string::npos) {
            lines.push_back(l);
          }
        }
        for (size_t k = lines.size() > 40 ? lines.size() - 40 : 0; k < lines.size(); ++k) {
          std::printf("%s\n", lines[k].c_str());
        }
      }
    }
    std::fflush(stdout);
  }

  // Creates topic `name` (DELAY, `queues` per group) on the groups `on` through broker 0 and
  // waits until every replica of each describes it.
  void CreateDelayTopic(const std::string& name, int queues, const std::vector<int>& on) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(proto::DELAY);
    t.set_queues(queues);
    std::vector<std::string> placement;
    for (int g : on) placement.push_back(groups_[g].name);
    const int leader = Leader(on.front());
    ASSERT_GE(leader, 0);
    auto created = client::AdminClient(Options(leader)).CreateTopic(t, placement);
    ASSERT_TRUE(created.ok()) << created.status();
    for (int g : on) {
      for (int i : groups_[g].members) {
        ASSERT_TRUE(
            AwaitTrue([&] { return client::AdminClient(Quick(i)).DescribeTopic(name).ok(); },
                      std::chrono::seconds(30), name + " on replica " + std::to_string(i),
                      std::chrono::milliseconds(5)));
      }
    }
  }

  // Sends `n` messages "<prefix><k>" to `topic` through broker `i`, each delayed one hour, one
  // at a time; each must be acknowledged (ASSERT: use ASSERT_NO_FATAL_FAILURE).
  void SendDelayed(int i, const std::string& topic, int n, const std::string& prefix) {
    client::Producer producer(Options(i));
    for (int k = 0; k < n; ++k) {
      client::OutgoingMessage m;
      m.topic = topic;
      m.body = prefix + std::to_string(k);
      m.delay_ms = 3'600'000;
      auto sent = producer.Send(m);
      ASSERT_TRUE(sent.ok()) << m.body << ": " << sent.status();
    }
  }

  std::vector<Group> groups_;
};

}  // namespace tokimq::testing
