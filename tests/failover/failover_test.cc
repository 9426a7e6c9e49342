// Failover by election (issue 20 items 4 and 7): etcd + one broker group of three replicas in
// sync mode on loopback; the leader is killed (SIGKILL) under a load of delayed messages while a
// consumer group receives and acks; every send ack, receipt and ack goes into a History.
// Checked: a new leader is elected in a newer term, 0 acknowledged sends lost, 0 delivered
// early, 0 timer duplicates (two copies of one source). Send duplicates (a producer's retry
// after a lost answer) and redeliveries (a receive answer cut by a kill) are printed.
//
// TOKIMQ_FAILOVER_KILLS (default 2) sets the number of kills; scripts/jepsen.sh runs 20 and
// prints the failover times (p50 / max). A killed replica comes back with an empty data dir
// (a replaced machine) and catches up from the leader. TOKIMQ_FAILOVER_DRAIN_MS (default
// kDrainNoProgressMs) is how long the final drain waits without progress; TOKIMQ_KEEP_FAILED=DIR
// keeps a failed run's etcd and replica directories.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "client/admin.h"
#include "client/cluster_consumer.h"
#include "client/cluster_producer.h"
#include "client/producer.h"
#include "client/route_cache.h"
#include "failover/history.h"
#include "failover/load.h"
#include "fmt/format.h"
#include "support/await.h"
#include "support/cluster_processes.h"
#include "support/run_command.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;
using client::AdminClient;
using client::ClientOptions;
using testing::AwaitTrue;
using testing::History;

using testing::EnvInt;
using testing::NowMs;
using testing::Percentile;

constexpr int kReplicas = 3;
constexpr int kLeaseTtlS = 2;
// Sends a leader acknowledges before it is killed (about 1.5 s of the load under ASAN).
constexpr int64_t kSendsPerLeader = 400;

// The replicas are brokers_[0..kReplicas) of the fixture, data dirs r0, r1, r2.
class FailoverTest : public testing::ClusterProcessTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ClusterProcessTest::SetUp());
    for (int i = 0; i < kReplicas; ++i) ASSERT_TRUE(AddBroker("r" + std::to_string(i), Args(i)));
    ASSERT_GE(WaitLeader(0), 0);
  }
  std::string Dir(int i) { return dir_.Join("r" + std::to_string(i)); }
  std::vector<std::string> Args(int i) {
    std::vector<std::string> args = MemberArgs("g1");
    args.insert(args.end(), {"--broker-id", std::to_string(i), "--replication", mode_,
                             "--lease-ttl", std::to_string(kLeaseTtlS), "--grpc-port", "0"});
    return args;
  }
  ClientOptions Quick(int i) {
    ClientOptions o = Options(i);
    o.connect_timeout_ms = 500;
    o.request_timeout_ms = 1'000;
    return o;
  }
  // The replica that reports itself leader of a term newer than `after`; -1 when none does
  // within the wait. *term gets its term.
  int WaitLeader(int64_t after, int64_t* term = nullptr) {
    int found = -1;
    (void)AwaitTrue(
        [&] {
          for (int i = 0; i < kReplicas; ++i) {
            if (brokers_[i]->pid() <= 0) continue;
            auto gs = AdminClient(Quick(i)).GroupStatus();
            if (gs.ok() && gs->role() == "leader" && gs->term() > after) {
              found = i;
              if (term) *term = gs->term();
              return true;
            }
          }
          return false;
        },
        30s, "a leader", 5ms);
    return found;
  }
  // Every follower holds the leader's CommitLog end as it was when the wait started (a fixed
  // point: under load the ends are never equal at one probe) and pulled within the last second.
  // A restarted replica copies the whole log (it comes back empty), which grows with every kill
  // of a long run: up to 5 minutes. On a timeout prints what the leader sees of each follower.
  // *bytes (optional) gets that CommitLog end.
  bool CaughtUp(int leader, int64_t* bytes = nullptr) {
    int64_t target = -1;
    const bool ok = AwaitTrue(
        [&] {
          auto l = AdminClient(Quick(leader)).GroupStatus();
          if (!l.ok()) return false;
          if (target < 0) target = l->max_offset();
          int followers = 0;
          for (const proto::FollowerLag& f : l->followers()) {
            if (f.acked_offset() >= target && f.last_pull_ms() < 1'000) ++followers;
          }
          return followers == kReplicas - 1;
        },
        300s, "followers caught up", 5ms);
    if (bytes) *bytes = target;
    if (!ok) {
      auto l = AdminClient(Quick(leader)).GroupStatus();
      std::printf("leader %d: %s\n", leader,
                  l.ok() ? l->ShortDebugString().c_str() : l.status().ToString().c_str());
      for (int i = 0; i < kReplicas; ++i) {
        auto g = AdminClient(Quick(i)).GroupStatus();
        std::printf("replica %d: %s\n", i,
                    g.ok() ? g->ShortDebugString().c_str() : g.status().ToString().c_str());
      }
    }
    return ok;
  }

  // The DELAY topic "orders" with one queue, created through the leader.
  void CreateOrders(int leader) {
    proto::TopicConfig t;
    t.set_name("orders");
    t.set_type(proto::DELAY);
    t.set_queues(1);
    ASSERT_TRUE(AdminClient(brokers_[leader]->Options()).CreateTopic(t, {}).ok());
  }

  // A leader frozen (SIGSTOP) past its lease is replaced; when it runs again it must not
  // acknowledge a single write, even to a client that still talks to it directly, and it
  // becomes a follower of the new term.
  void CheckPausedLeader() {
    int64_t term = 0;
    const int old = WaitLeader(0, &term);
    ASSERT_GE(old, 0);
    ASSERT_NO_FATAL_FAILURE(CreateOrders(old));
    ASSERT_TRUE(CaughtUp(old));
    client::Producer stale(brokers_[old]->Options());  // a client that never re-reads routes
    client::OutgoingMessage m;
    m.topic = "orders";
    m.body = "before";
    m.delay_ms = 100;
    ASSERT_TRUE(stale.Send(m).ok());

    ASSERT_EQ(::kill(brokers_[old]->pid(), SIGSTOP), 0);
    int64_t new_term = 0;
    const int next = WaitLeader(term, &new_term);
    ASSERT_GE(next, 0);
    ASSERT_NE(next, old);
    // Requests to the frozen leader queue in its socket; it answers them when it runs again.
    std::atomic<int> acked{0}, refused{0};
    std::thread sender([&] {
      for (int i = 0; i < 20; ++i) {
        client::OutgoingMessage x = m;
        x.body = "stale" + std::to_string(i);
        auto r = stale.Send(x);
        (r.ok() ? acked : refused).fetch_add(1);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(::kill(brokers_[old]->pid(), SIGCONT), 0);
    sender.join();
    EXPECT_EQ(acked.load(), 0) << "a deposed leader acknowledged a write";
    EXPECT_EQ(refused.load(), 20);
    // One answer checks role, term and leader: a deposed leader restarts itself (docs/cluster.md
    // "Election" step 5), so a second status request right after may find it down (seen in a
    // full ASan ctest run, 2026-12-02).
    const std::string new_leader = brokers_[next]->Options().broker;
    std::string last;
    EXPECT_TRUE(AwaitTrue(
        [&] {
          auto gs = AdminClient(Quick(old)).GroupStatus();
          last = gs.ok() ? gs->ShortDebugString() : gs.status().ToString();
          return gs.ok() && gs->role() == "follower" && gs->term() == new_term &&
                 gs->leader_address() == new_leader;
        },
        10s, "the old leader to follow the new term's leader " + new_leader, 5ms))
        << "last answer: " << last;
  }

  // On a failure: the election and replication lines of every replica's log (the temp dir goes).
  void DumpLogs() {
    for (int i = 0; i < kReplicas; ++i) {
      std::printf("---- replica %d (%s.log), election / replication lines:\n", i, Dir(i).c_str());
      std::ifstream in(Dir(i) + ".log");
      std::vector<std::string> lines;
      for (std::string l; std::getline(in, l);) {
        if (l.find("election") != std::string::npos || l.find("replication") != std::string::npos ||
            l.find("group g1") != std::string::npos) {
          lines.push_back(l);
        }
      }
      for (size_t k = lines.size() > 40 ? lines.size() - 40 : 0; k < lines.size(); ++k) {
        std::printf("%s\n", lines[k].c_str());
      }
    }
    std::fflush(stdout);
  }

  std::string mode_ = "sync";
};

// The same group in async mode: no follower is asked before an answer, so only the lease
// fence on the write path keeps a resumed old leader from acknowledging.
class FailoverAsyncTest : public FailoverTest {
 protected:
  void SetUp() override {
    mode_ = "async";
    FailoverTest::SetUp();
  }
};

TEST_F(FailoverTest, KillNineOfTheLeaderUnderDelayedLoadLosesNothingAcknowledged) {
  int64_t term = 0;
  int leader = WaitLeader(0, &term);
  ASSERT_GE(leader, 0);
  proto::TopicConfig t;
  t.set_name("orders");
  t.set_type(proto::DELAY);
  t.set_queues(2);
  ASSERT_TRUE(AdminClient(Options(leader)).CreateTopic(t, {}).ok());
  for (int i = 0; i < kReplicas; ++i) {
    ASSERT_TRUE(AwaitTrue([&] { return AdminClient(Quick(i)).DescribeTopic("orders").ok(); }, 30s,
                          "orders on replica " + std::to_string(i), 5ms));
  }
  ASSERT_TRUE(CaughtUp(leader));

  History history;
  std::atomic<bool> stop_producer{false}, stop_consumer{false};
  std::atomic<int64_t> last_ok_ms{0}, acked{0}, receive_rounds{0};
  const ClientOptions bootstrap = AllBrokers();
  std::thread producer(testing::ProduceLoop, bootstrap, &history, &stop_producer, &last_ok_ms,
                       &acked, std::string("orders"), std::string("m"));
  std::thread consumer(testing::ConsumeLoop, bootstrap, &history, &stop_consumer, &receive_rounds,
                       std::string("orders"));
  // Waits until `n` more sends were acknowledged (the load reached the current leader).
  auto await_sends = [&](int64_t n) {
    const int64_t target = acked.load() + n;
    return AwaitTrue([&] { return acked.load() >= target; }, 60s,
                     std::to_string(n) + " more acknowledged sends", 5ms);
  };

  const int kills = EnvInt("TOKIMQ_FAILOVER_KILLS", 2);
  std::vector<int64_t> election_ms, writes_back_ms, killed_at_ms;
  // The kills run in a lambda so that a failed ASSERT still stops and joins the client threads.
  auto kill_loop = [&] {
    for (int k = 0; k < kills; ++k) {
      ASSERT_TRUE(await_sends(kSendsPerLeader));  // load on the leader
      const int64_t killed_at = NowMs();
      brokers_[leader]->Kill();
      killed_at_ms.push_back(killed_at);
      int64_t new_term = 0;
      const int next = WaitLeader(term, &new_term);
      ASSERT_GE(next, 0) << "no new leader after kill " << k;
      election_ms.push_back(NowMs() - killed_at);
      ASSERT_NE(next, leader);
      EXPECT_GT(new_term, term);
      ASSERT_TRUE(AwaitTrue([&] { return last_ok_ms.load() > killed_at; }, 30s,
                            "a send acknowledged after the kill", 5ms));
      writes_back_ms.push_back(last_ok_ms.load() - killed_at);
      std::printf(
          "kill %d: leader %d (term %lld) -> %d (term %lld): elected after %lld ms, "
          "sends acknowledged again after %lld ms\n",
          k + 1, leader, static_cast<long long>(term), next, static_cast<long long>(new_term),
          static_cast<long long>(election_ms.back()),
          static_cast<long long>(writes_back_ms.back()));
      std::fflush(stdout);  // progress of long runs (scripts/jepsen.sh)
      // The killed replica returns as a fresh follower (see the file comment).
      // Same port: clients and peers know the replica's address (a replaced machine keeps it).
      std::filesystem::remove_all(Dir(leader));
      brokers_[leader]->set_fixed_port(brokers_[leader]->port());
      ASSERT_TRUE(brokers_[leader]->Start()) << "restart on port " << brokers_[leader]->port();
      const int64_t restarted_at = NowMs();
      int64_t log_bytes = 0;
      ASSERT_TRUE(CaughtUp(next, &log_bytes)) << "the restarted replica did not catch up";
      std::printf("kill %d: the restarted (empty) replica copied the log (%lld bytes) in %lld ms\n",
                  k + 1, static_cast<long long>(log_bytes),
                  static_cast<long long>(NowMs() - restarted_at));
      std::fflush(stdout);
      leader = next;
      term = new_term;
    }
  };
  kill_loop();
  if (HasFailure()) DumpLogs();
  // Load on the last leader too before the producer stops.
  if (!HasFatalFailure()) {
    EXPECT_TRUE(await_sends(kSendsPerLeader / 4));
  }
  stop_producer = true;
  producer.join();
  // Everything acknowledged is due within 2.5 s; a receive whose answer a kill cut leaves its
  // messages leased (the lease was replicated) until the invisible duration and the first
  // backoff pass. Wait while the consumer makes progress; the wait ends without a failure after
  // kDrainNoProgressMs without progress: the check below counts what is still missing as lost.
  const std::chrono::milliseconds drain_no_progress(
      EnvInt("TOKIMQ_FAILOVER_DRAIN_MS", static_cast<int>(testing::kDrainNoProgressMs)));
  if (!HasFatalFailure()) {
    int64_t outstanding = history.Outstanding();
    auto last_progress = std::chrono::steady_clock::now();
    (void)AwaitTrue(
        [&] {
          const int64_t now_outstanding = history.Outstanding();
          if (now_outstanding < outstanding) last_progress = std::chrono::steady_clock::now();
          outstanding = now_outstanding;
          return outstanding == 0 ||
                 std::chrono::steady_clock::now() - last_progress > drain_no_progress;
        },
        30min, "every acknowledged message received", 100ms);
  }
  // The verdict is taken now; on a loss the consumer runs 60 s more to tell a send that never
  // comes back from one that came back later than the window allows (printed, still a failure).
  const History::Report at_window = history.Check();
  if (at_window.lost > 0) {
    (void)AwaitTrue([&] { return history.Outstanding() == 0; }, 60s,
                    "the lost sends, late", 100ms);
    std::printf("of %lld lost, %lld arrived within 60 s after the drain window\n",
                static_cast<long long>(at_window.lost),
                static_cast<long long>(at_window.lost - history.Check().lost));
  }
  // Late duplicates, if any: three more receive calls (long polls of 200 ms) see them.
  const int64_t rounds_then = receive_rounds.load();
  EXPECT_TRUE(AwaitTrue([&] { return receive_rounds.load() >= rounds_then + 3; }, 30s,
                        "three more receive calls", 5ms));
  stop_consumer = true;
  consumer.join();
  if (HasFatalFailure()) return;
  const History::Report r = history.Check();  // late duplicates included
  std::printf("history: %s\n", r.ToString().c_str());
  std::printf(
      "failover over %d kills: election p50 %lld ms max %lld ms; sends acknowledged "
      "again p50 %lld ms max %lld ms (lease TTL %d s)\n",
      kills, static_cast<long long>(Percentile(election_ms, 0.5)),
      static_cast<long long>(Percentile(election_ms, 1.0)),
      static_cast<long long>(Percentile(writes_back_ms, 0.5)),
      static_cast<long long>(Percentile(writes_back_ms, 1.0)), kLeaseTtlS);
  // Evidence for a failure: when each kill and each lost send's acknowledgement happened.
  if (at_window.lost > 0 || r.timer_duplicates > 0) {
    std::printf("kills at (client ms): %s\n", fmt::format("{}", fmt::join(killed_at_ms, " ")).c_str());
    std::printf("lost sends acknowledged at: %s\n",
                fmt::format("{}", fmt::join(at_window.lost_ack_ms, " ")).c_str());
  }
  EXPECT_GT(r.acknowledged, 0);
  EXPECT_EQ(at_window.lost, 0) << at_window.ToString();
  EXPECT_EQ(r.early, 0) << r.ToString();
  EXPECT_EQ(r.phantom, 0) << r.ToString();
  // Sync mode: a copy reaches a consumer only after a follower holds it (the receive waits for
  // its lease record, written after the copy), so every new leader knows every move a consumer
  // saw (issue 20 item 7: "0 duplicates created by timer moves"). A producer's retry after a
  // lost answer stores a send twice: counted apart (send_duplicates), allowed.
  EXPECT_EQ(r.timer_duplicates, 0) << r.ToString();
}

// A leader frozen (SIGSTOP) past its lease is replaced; when it runs again it must not
// acknowledge a single write, even to a client that still talks to it directly, and it becomes
// a follower of the new term (issue 20 item 4: "a deposed leader that comes back ... cannot get
// a write acknowledged").
TEST_F(FailoverTest, PausedLeaderThatComesBackAcknowledgesNothingAndFollows) {
  CheckPausedLeader();
}

TEST_F(FailoverAsyncTest, PausedLeaderThatComesBackAcknowledgesNothingEvenInAsyncMode) {
  CheckPausedLeader();
}

// `tokimq send --failover-wait`: how long the CLI retries while the group cannot take the send
// (a fresh tester's finding: `--timeout 1s` still blocked ~15 s, the cluster producer's
// default wait). Two of the three replicas frozen: the one left may lead but gets no follower
// ack (sync), so every attempt fails until the wait is over.
TEST_F(FailoverTest, CliSendGivesUpWhenItsFailoverWaitIsOver) {
  int64_t term = 0;
  const int leader = WaitLeader(0, &term);
  ASSERT_GE(leader, 0);
  ASSERT_NO_FATAL_FAILURE(CreateOrders(leader));
  const int left = (leader + 1) % kReplicas;
  for (int i = 0; i < kReplicas; ++i) {
    if (i != left) {
      ASSERT_EQ(::kill(brokers_[i]->pid(), SIGSTOP), 0);
    }
  }
  auto send = [&](const std::string& wait, int64_t* took_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    testing::CommandResult r = testing::RunShell(
        fmt::format("{} --broker {} --timeout 1s send --topic orders --body x --delay 1s "
                    "--failover-wait {} 2>&1",
                    TOKIMQ_CLI_BIN, brokers_[left]->Options().broker, wait));
    *took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - t0)
                   .count();
    return r;
  };
  int64_t at_once_ms = 0, waited_ms = 0;
  testing::CommandResult at_once = send("0s", &at_once_ms);
  testing::CommandResult waited = send("4s", &waited_ms);
  for (int i = 0; i < kReplicas; ++i) {
    if (i != left) ::kill(brokers_[i]->pid(), SIGCONT);
  }
  EXPECT_NE(at_once.exit_code, 0) << at_once.out;
  EXPECT_LT(at_once_ms, 4'000) << at_once.out;  // one attempt: a route read and a 1 s request
  EXPECT_NE(waited.exit_code, 0) << waited.out;
  EXPECT_GE(waited_ms, 4'000) << waited.out;
  EXPECT_LT(waited_ms, 12'000) << waited.out;  // not the default 15 s
}

}  // namespace
}  // namespace tokimq
