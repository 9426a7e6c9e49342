// A leader isolated from its followers and etcd (issue 20 item 7: "no two leaders acknowledge
// writes; after the heal nothing acknowledged is lost"). Every replica runs in its own network
// namespace behind a veth on a bridge, etcd listens on the bridge (failover/netns.h); the
// leader is cut off by setting its veth down while it keeps running, then healed.
//
// While cut off, a producer that entered the old leader's namespace (a client that never
// re-reads routes) keeps sending to it and records every attempt; the majority side elects a
// new leader and the routed load goes on there. Checked: the old leader acknowledges no send
// started after the cut (sync mode: no follower can pull it), so none after the successor's
// election; it stops calling itself leader within its lease; the successor's term is newer and
// its side acknowledges sends; after the heal the old leader follows the new term, and a
// restart with its data (rejoin: cut what it wrote alone) brings its CommitLog level with the
// leader's; the history checker counts 0 acknowledged sends lost, 0 early, 0 phantom.
//
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); skipped with a message elsewhere.
// TOKIMQ_PARTITIONS (default 1) sets the number of isolations (scripts/jepsen.sh runs more).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/admin.h"
#include "client/producer.h"
#include "failover/broker_groups.h"
#include "failover/history.h"
#include "failover/load.h"
#include "failover/netns.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;
using client::AdminClient;
using testing::AwaitTrue;
using testing::EnvInt;
using testing::History;
using testing::NamespaceNetwork;
using testing::NowMs;

constexpr int kReplicas = 3;
constexpr int kLeaseTtlS = 2;

class PartitionTest : public testing::BrokerGroupsTest {
 protected:
  // The group's ack mode (AsyncPartitionTest: "async").
  virtual std::string Mode() const { return "sync"; }
  bool Sync() const { return Mode() == "sync"; }
  void SetUp() override {
    auto net = NamespaceNetwork::Create(kReplicas);
    if (!net.ok()) {
      GTEST_SKIP() << "cannot build network namespaces (needs root: CAP_NET_ADMIN and "
                      "CAP_SYS_ADMIN, iproute2): "
                   << net.status();
    }
    net_ = std::move(*net);
    etcd_.set_extra_host(net_->hub_address());  // the brokers reach etcd over the bridge
    ASSERT_NO_FATAL_FAILURE(BrokerGroupsTest::SetUp());
    group_ = AddGroup(
        "g1", kReplicas, Mode(), kLeaseTtlS,
        [&](int id, std::vector<std::string>* args) {
          args->insert(args->end(), {"--bind", net_->address(id)});
        },
        [&](int id, testing::BrokerProcess* b) {
          b->set_netns(net_->path(id), net_->address(id));
        });
    ASSERT_FALSE(HasFailure());
  }
  void TearDown() override {
    load_.reset();     // the clients stop before the brokers
    brokers_.clear();  // the processes go before their namespaces
    net_.reset();
  }

  // The group's leader once topic "orders" (2 queues) exists and every follower is level; -1
  // after a failed check.
  int LeaderWithTopic(int64_t* term) {
    const int leader = WaitLeader(group_, 0, term);
    EXPECT_GE(leader, 0);
    if (leader < 0) return -1;
    CreateDelayTopic("orders", 2, {group_});
    EXPECT_TRUE(CaughtUp(group_));
    return HasFailure() ? -1 : leader;
  }

  // One isolation of the current leader under load; see the file comment. `round` numbers
  // the ids of the pinned producer's sends.
  // In async mode the old leader may acknowledge sends after the cut until it steps down; their
  // loss window ([cut - 1 s, successor's election], client ms) goes to *loss_windows.
  void IsolateLeaderOnce(int round, History* history, testing::CheckedLoad* load,
                         std::vector<std::pair<int64_t, int64_t>>* loss_windows = nullptr) {
    int64_t term = 0;
    const int old = WaitLeader(group_, 0, &term);
    ASSERT_GE(old, 0);
    ASSERT_TRUE(load->AwaitSends(200));

    // The pinned producer: a thread in the old leader's namespace, sending single delayed
    // messages straight to it (request timeout 1 s: a sync wait past it is a failed send).
    struct Attempt {
      int64_t start_ms, end_ms;
      bool ok;
    };
    std::mutex mu;
    std::vector<Attempt> attempts;
    std::atomic<bool> stop{false};
    std::atomic<int> pinned_acked{0};
    std::atomic<int64_t> not_leader_ms{-1};  // when the old leader first denied being leader
    std::string enter_error;
    std::thread pinned([&] {
      absl::Status s = net_->EnterNamespace(old);
      if (!s.ok()) {
        enter_error = s.ToString();
        return;
      }
      client::ClientOptions o = Options(old);
      o.connect_timeout_ms = 500;
      o.request_timeout_ms = 1'000;
      client::Producer producer(o);
      AdminClient admin(o);
      for (int n = 0; !stop.load(); ++n) {
        client::OutgoingMessage m;
        m.topic = "orders";
        m.body = "p" + std::to_string(round) + "-" + std::to_string(n);
        m.delay_ms = 500;
        const int64_t start = NowMs();
        history->Attempt(m.body, start + 500);
        auto r = producer.Send(m);
        const int64_t end = NowMs();
        if (r.ok()) {
          history->SendOk(m.body, r->deliver_at_ms);
          pinned_acked.fetch_add(1);
        }
        {
          std::lock_guard<std::mutex> l(mu);
          attempts.push_back({start, end, r.ok()});
        }
        if (not_leader_ms.load() < 0) {
          auto gs = admin.GroupStatus();
          if (gs.ok() && gs->role() != "leader") not_leader_ms = NowMs();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    auto stop_pinned = [&] {
      stop = true;
      if (pinned.joinable()) pinned.join();
    };
    struct Joiner {  // a failed ASSERT below must not leave the thread running
      std::function<void()> f;
      ~Joiner() { f(); }
    } joiner{stop_pinned};
    // The old leader acknowledges the pinned producer before the cut.
    if (!AwaitTrue([&] { return pinned_acked.load() >= 10; }, 30s,
                   "10 sends acknowledged by the leader in its namespace")) {
      stop_pinned();
      FAIL() << "pinned producer: " << enter_error;
    }

    ASSERT_TRUE(net_->Cut(old).ok());
    const int64_t cut_ms = NowMs();  // after the link is down: later sends cannot replicate
    int64_t new_term = 0;
    const int next = WaitLeader(group_, term, &new_term, old);
    const int64_t elected_ms = NowMs();
    const bool majority_acks = next >= 0 && static_cast<bool>(load->AwaitSends(100, 30s));
    // The old leader steps down within its lease (TTL - margin after its last keepalive).
    const bool stepped_down =
        static_cast<bool>(AwaitTrue([&] { return not_leader_ms.load() >= 0; }, 10s,
                                    "the cut-off leader to stop calling itself leader"));
    std::this_thread::sleep_for(500ms);  // more pinned attempts while both sides run
    ASSERT_TRUE(net_->Heal(old).ok());
    const int64_t healed_ms = NowMs();
    std::this_thread::sleep_for(300ms);  // pinned attempts after the heal too
    stop_pinned();

    ASSERT_GE(next, 0) << "no new leader on the majority side";
    EXPECT_NE(next, old);
    EXPECT_GT(new_term, term);
    EXPECT_TRUE(majority_acks) << "the majority side acknowledged no sends";
    EXPECT_TRUE(stepped_down);
    int after_cut = 0, acked_after_cut = 0, acked_after_election = 0, acked_after_heal = 0;
    for (const Attempt& a : attempts) {
      if (a.start_ms < cut_ms) continue;
      ++after_cut;
      if (!a.ok) continue;
      ++acked_after_cut;
      if (a.start_ms >= elected_ms) ++acked_after_election;
      if (a.start_ms >= healed_ms) ++acked_after_heal;
    }
    std::printf(
        "isolation %d: leader %d (term %lld) cut off; %d (term %lld) elected after %lld ms; old "
        "leader stopped calling itself leader after %lld ms; pinned sends after the cut: %d, "
        "acknowledged %d (after the election %d, after the heal %d)\n",
        round, old, static_cast<long long>(term), next, static_cast<long long>(new_term),
        static_cast<long long>(elected_ms - cut_ms),
        static_cast<long long>(not_leader_ms.load() - cut_ms), after_cut, acked_after_cut,
        acked_after_election, acked_after_heal);
    std::fflush(stdout);
    EXPECT_GT(after_cut, 0) << "the pinned producer made no attempt while cut off";
    if (Sync()) {
      EXPECT_EQ(acked_after_cut, 0) << "the cut-off leader acknowledged a write it could not "
                                       "replicate";
    }
    EXPECT_EQ(acked_after_election, 0) << "two leaders acknowledged writes";
    // Every acknowledgement of the old leader reached its client before the successor was
    // elected (async: it steps down at TTL - margin, the successor waits for the TTL).
    int64_t last_old_ack_ms = 0;
    for (const Attempt& a : attempts) {
      if (a.ok) last_old_ack_ms = std::max(last_old_ack_ms, a.end_ms);
    }
    EXPECT_LT(last_old_ack_ms, elected_ms) << "the old leader acknowledged after the election";
    if (loss_windows != nullptr) loss_windows->push_back({cut_ms - 1'000, elected_ms});

    // After the heal the old leader follows the new term.
    ASSERT_TRUE(AwaitTrue(
        [&] {
          auto gs = AdminClient(Quick(old)).GroupStatus();
          return gs.ok() && gs->role() == "follower" && gs->term() == new_term &&
                 gs->leader_address() == Options(next).broker;
        },
        20s, "the old leader to follow the new term", 5ms));
    // Async: the producer stops here. An async leader is not held back by its followers, and
    // in these namespaces under ASan the followers fell 6-68 s behind the routed load (see
    // docs/operations.md); the fixed point below must be reachable.
    if (!Sync()) load->StopProducer();
    // It may hold bytes it wrote alone (the pinned sends it could not replicate): it then
    // restarts itself, and the rejoin check cuts them (docs/replication.md "Deposed leaders",
    // "Rejoin"). Should it not hold the leader's end within 10 s, restart it by hand with its data
    // in its namespace, on its address (the printed line says so), and wait until every replica
    // holds the leader's end (the load keeps writing, so ends are compared to a fixed point).
    if (!CaughtUpUnderLoad(group_, 10s)) {
      std::printf(
          "isolation %d: the old leader is not level after 10 s; restarting it with its data\n",
          round);
      EXPECT_EQ(brokers_[old]->Stop(), 0);
      brokers_[old]->set_fixed_port(brokers_[old]->port());
      ASSERT_TRUE(brokers_[old]->Start());
    }
    ASSERT_TRUE(CaughtUpUnderLoad(group_)) << "the old leader did not catch up after the heal";
  }

  // The checked load (a producer and a consumer through every broker) into history_, started.
  testing::CheckedLoad& StartLoad() {
    load_ = std::make_unique<testing::CheckedLoad>(AllBrokers(), &history_);
    load_->Start();
    return *load_;
  }

  std::unique_ptr<NamespaceNetwork> net_;
  int group_ = -1;
  History history_;
  std::unique_ptr<testing::CheckedLoad> load_;
};

TEST_F(PartitionTest, IsolatedLeaderAcknowledgesNothingAndLosesNothingAfterTheHeal) {
  int64_t term = 0;
  const int leader = LeaderWithTopic(&term);
  ASSERT_GE(leader, 0);

  History& history = history_;
  testing::CheckedLoad& load = StartLoad();
  const int rounds = EnvInt("TOKIMQ_PARTITIONS", 1);
  for (int k = 0; k < rounds && !HasFatalFailure(); ++k) {
    IsolateLeaderOnce(k + 1, &history, &load);
  }
  if (HasFailure()) DumpLogs();
  if (!HasFatalFailure()) {
    EXPECT_TRUE(load.AwaitSends(100));
  }
  load.Drain();
  if (HasFatalFailure()) return;

  testing::ExpectSyncGuarantees(history);
}

// Isolated followers (issue 20 item 7; docs/operations.md "Fault tests"). One follower cut off:
// the leader keeps acknowledging through the other (sync needs one follower), no election
// happens, and the cut-off follower catches up after the heal. Both followers cut off: the
// leader, still holding its etcd lease, acknowledges nothing (no follower can hold a write);
// after the heal sends are acknowledged again under the same term and both followers level.
TEST_F(PartitionTest, IsolatedFollowersLoseNothingAndBothCutStopAcks) {
  int64_t term = 0;
  const int leader = LeaderWithTopic(&term);
  ASSERT_GE(leader, 0);
  const int f1 = (leader + 1) % kReplicas;
  const int f2 = (leader + 2) % kReplicas;
  auto same_leader = [&] {
    auto gs = AdminClient(Quick(leader)).GroupStatus();
    return gs.ok() && gs->role() == "leader" && gs->term() == term;
  };

  History& history = history_;
  testing::CheckedLoad& load = StartLoad();
  ASSERT_TRUE(load.AwaitSends(200));

  // One follower cut off, past the lease TTL (its etcd registration lapses too).
  ASSERT_TRUE(net_->Cut(f1).ok());
  const int64_t one_cut_ms = NowMs();
  EXPECT_TRUE(load.AwaitSends(200, 30s)) << "no acks through the remaining follower";
  std::this_thread::sleep_for(std::chrono::seconds(kLeaseTtlS + 1));
  EXPECT_TRUE(load.AwaitSends(50, 30s));
  EXPECT_TRUE(same_leader()) << "an election while only a follower was cut off";
  ASSERT_TRUE(net_->Heal(f1).ok());
  const int64_t one_healed_ms = NowMs();
  ASSERT_TRUE(CaughtUpUnderLoad(group_)) << "the cut-off follower did not catch up";
  std::printf("follower %d cut off for %lld ms; level with the leader %lld ms after the heal\n", f1,
              static_cast<long long>(one_healed_ms - one_cut_ms),
              static_cast<long long>(NowMs() - one_healed_ms));

  // Both followers cut off: whatever was in flight settles within the ack timeout (3 s), then
  // nothing more may be acknowledged while they are away.
  ASSERT_TRUE(net_->Cut(f1).ok());
  ASSERT_TRUE(net_->Cut(f2).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(3'500));
  const int64_t acked_then = load.acked();
  std::this_thread::sleep_for(std::chrono::seconds(kLeaseTtlS + 2));
  const int64_t acked_while_cut = load.acked() - acked_then;
  EXPECT_EQ(acked_while_cut, 0) << "the leader acknowledged sends no follower could hold";
  EXPECT_TRUE(same_leader()) << "the leader (etcd reachable) lost its term";
  ASSERT_TRUE(net_->Heal(f1).ok());
  ASSERT_TRUE(net_->Heal(f2).ok());
  const int64_t both_healed_ms = NowMs();
  EXPECT_TRUE(load.AwaitSends(100, 30s)) << "no acks after the heal";
  const int64_t acks_back_ms = NowMs();
  ASSERT_TRUE(CaughtUpUnderLoad(group_)) << "the followers did not catch up";
  EXPECT_TRUE(same_leader());
  std::printf(
      "both followers cut off: %lld sends acknowledged while cut (after the in-flight ones); "
      "100 acknowledged %lld ms after the heal\n",
      static_cast<long long>(acked_while_cut),
      static_cast<long long>(acks_back_ms - both_healed_ms));
  std::fflush(stdout);
  load.Drain();
  testing::ExpectSyncGuarantees(history);
  if (HasFailure()) DumpLogs();
}

// The same isolation in async mode (docs/cluster.md "Guarantees per ack mode"): the cut-off leader
// may acknowledge sends until it steps down, and those are all it may lose — every lost
// acknowledged send was acknowledged between the cut (less 1 s of replication lag) and the
// successor's election; it acknowledges nothing after the successor is elected; after the heal
// it cuts its own tail (rejoin) and follows.
class AsyncPartitionTest : public PartitionTest {
 protected:
  std::string Mode() const override { return "async"; }
};

TEST_F(AsyncPartitionTest, IsolatedLeaderLosesOnlyWhatItAcknowledgedBeforeItsSuccessor) {
  int64_t term = 0;
  const int leader = LeaderWithTopic(&term);
  ASSERT_GE(leader, 0);

  History& history = history_;
  testing::CheckedLoad& load = StartLoad();
  std::vector<std::pair<int64_t, int64_t>> windows;
  IsolateLeaderOnce(1, &history, &load, &windows);
  // Async loses the cut-off leader's window for good, and no receive fails for want of a
  // follower: 10 s without progress ends the wait.
  load.Drain(std::chrono::seconds(10));
  if (HasFatalFailure()) return;
  const History::Report r = history.Check();
  std::printf("async isolation: %zu acknowledged sends lost (the cut-off leader's window)\n",
              r.lost_ack_ms.size());
  testing::ExpectAsyncGuarantees(history, windows);
  if (HasFailure()) DumpLogs();
}

}  // namespace
}  // namespace tokimq
