// LeaderElection against a real etcd: who wins, the term, following, losing the lease.
#include "cluster/leader_election.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "cluster/keys.h"
#include "support/await.h"
#include "support/etcd_test.h"

namespace tokimq::cluster {
namespace {

using namespace std::chrono_literals;
using testing::AwaitTrue;

// What one replica's callbacks saw, in order.
struct Seen {
  std::mutex mu;
  std::vector<std::string> events;  // "elected T", "leader T addr", "lost T"
  void Add(std::string e) {
    std::lock_guard<std::mutex> l(mu);
    events.push_back(std::move(e));
  }
  std::vector<std::string> Get() {
    std::lock_guard<std::mutex> l(mu);
    return events;
  }
};

// Bounded real-time waits (AwaitTrue): etcd and the election are another process and thread.
class LeaderElectionTest : public testing::EtcdTest {
 protected:
  LeaderElectionTest() : EtcdTest(/*client_timeout_ms=*/300) {}
  std::unique_ptr<LeaderElection> Make(int id, Seen* seen, std::function<bool()> may = nullptr,
                                       EtcdClient* client = nullptr) {
    ElectionOptions o;
    o.cluster = "c1";
    o.self.set_name("g1");
    o.self.set_address("127.0.0.1:" + std::to_string(1000 + id));
    o.self.set_broker_id(id);
    o.ttl_s = 2;
    o.retry_ms = 100;
    ElectionCallbacks cb;
    cb.on_elected = [seen](int64_t t) { seen->Add("elected " + std::to_string(t)); };
    cb.on_leader = [seen](int64_t t, const proto::BrokerRecord& r) {
      seen->Add("leader " + std::to_string(t) + " " + r.address());
    };
    cb.on_lost = [seen](int64_t t, const std::string&) { seen->Add("lost " + std::to_string(t)); };
    cb.may_campaign = std::move(may);
    return std::make_unique<LeaderElection>(client ? client : etcd_client_.get(), o, cb);
  }
};

TEST_F(LeaderElectionTest, OneWinsWithThePutRevisionAsTermAndTheOtherFollowsIt) {
  Seen s0, s1;
  auto e0 = Make(0, &s0);
  e0->Start();
  ASSERT_TRUE(AwaitTrue([&] { return e0->leading(); }, 20s, "e0 leading"));
  const int64_t term = e0->leading_term();
  auto key = etcd_client_->Get(BrokerKey("c1", "g1"));
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->mod_revision, term);  // the term is the winning put's revision
  EXPECT_EQ(s0.Get(), std::vector<std::string>{"elected " + std::to_string(term)});
  auto e1 = Make(1, &s1);
  e1->Start();
  ASSERT_TRUE(AwaitTrue([&] { return !s1.Get().empty(); }, 20s, "a callback of e1"));
  EXPECT_EQ(s1.Get(),
            std::vector<std::string>{"leader " + std::to_string(term) + " 127.0.0.1:1000"});
  EXPECT_FALSE(e1->leading());
  EXPECT_EQ(e1->known_term(), term);
}

TEST_F(LeaderElectionTest, ResignedLeaderIsReplacedAtOnceInANewerTerm) {
  Seen s0, s1;
  auto e0 = Make(0, &s0);
  e0->Start();
  ASSERT_TRUE(AwaitTrue([&] { return e0->leading(); }, 20s, "e0 leading"));
  const int64_t first = e0->leading_term();
  auto e1 = Make(1, &s1);
  e1->Start();
  ASSERT_TRUE(AwaitTrue([&] { return e1->known_term() == first; }, 20s, "e1 following"));
  const auto t0 = std::chrono::steady_clock::now();
  e0->Stop(/*resign=*/true);
  ASSERT_TRUE(AwaitTrue([&] { return e1->leading(); }, 20s, "e1 leading"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1)) << "not the TTL";
  EXPECT_GT(e1->leading_term(), first);
}

TEST_F(LeaderElectionTest, LeaseExpiredAtEtcdMakesTheLeaderLoseAndCampaignAgain) {
  Seen s0;
  auto e0 = Make(0, &s0);
  e0->Start();
  ASSERT_TRUE(AwaitTrue([&] { return e0->leading(); }, 20s, "e0 leading"));
  const int64_t first = e0->leading_term();
  auto key = etcd_client_->Get(BrokerKey("c1", "g1"));
  ASSERT_TRUE(key.ok() && key->has_value());
  ASSERT_TRUE(etcd_client_->LeaseRevoke((*key)->lease).ok());  // as if etcd expired it
  ASSERT_TRUE(AwaitTrue([&] { return e0->leading_term() > first; }, 20s, "a newer term"));
  auto ev = s0.Get();
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[1], "lost " + std::to_string(first));
  EXPECT_EQ(ev[2], "elected " + std::to_string(e0->leading_term()));
}

TEST_F(LeaderElectionTest, LeaderCutOffFromEtcdStepsDownBeforeItsLeaseCanExpire) {
  Seen s0;
  auto e0 = Make(0, &s0);
  e0->Start();
  ASSERT_TRUE(AwaitTrue([&] { return e0->leading(); }, 20s, "e0 leading"));
  const int64_t term = e0->leading_term();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a keepalive or two
  const auto stopped = std::chrono::steady_clock::now();
  etcd_.Kill();  // no keepalive succeeds from here on
  ASSERT_TRUE(AwaitTrue([&] { return !e0->leading(); }, 5s, "e0 stepping down"));
  // The last keepalive succeeded before `stopped`, so etcd keeps the lease >= 2 s after it:
  // the step-down (TTL - 500 ms margin after that keepalive's send) comes before that.
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, std::chrono::milliseconds(2000));
  EXPECT_EQ(s0.Get().back(), "lost " + std::to_string(term));
}

TEST_F(LeaderElectionTest, ACandidateThatDefersDoesNotCampaign) {
  Seen s0, s1;
  std::atomic<bool> allow{false};
  std::atomic<int> asked{0};
  auto e0 = Make(0, &s0, [&] {
    ++asked;
    return allow.load();
  });
  e0->Start();
  // Asked twice and deferred both times (the second ask comes a retry period after the first).
  ASSERT_TRUE(AwaitTrue([&] { return asked.load() >= 2; }, 20s, "two may_campaign calls"));
  EXPECT_FALSE(e0->leading());
  EXPECT_FALSE(etcd_client_->Get(BrokerKey("c1", "g1"))->has_value());
  allow = true;
  ASSERT_TRUE(AwaitTrue([&] { return e0->leading(); }, 20s, "e0 leading"));
}

// A replica restarted after it led finds its record still in the key, under a lease etcd keeps
// (an etcd restart renews every lease to its full TTL; the deposed leader's revoke failed while
// etcd was down). When it defers to another replica it removes that record, and the other
// campaigns at once instead of following the dead record until its lease runs out (a fresh
// tester, 2026-12-03: no leader for 11.3 s with a 10 s TTL whenever the old leader was not the
// first in campaign order). Without the removal e0 waits the old lease's 60 s.
TEST_F(LeaderElectionTest, ADeferringReplicaRemovesItsRecordFromBeforeARestart) {
  proto::BrokerRecord old;
  old.set_name("g1");
  old.set_address("127.0.0.1:1001");  // broker id 1's, as Make(1, ...) has it
  old.set_broker_id(1);
  auto old_lease = etcd_client_->LeaseGrant(60);
  ASSERT_TRUE(old_lease.ok()) << old_lease.status();
  ASSERT_TRUE(etcd_client_->Put(BrokerKey("c1", "g1"), EncodeValue(old), *old_lease).ok());
  Seen s0, s1;
  auto e0 = Make(0, &s0);
  e0->Start();
  ASSERT_TRUE(AwaitTrue([&] { return !s0.Get().empty(); }, 20s, "e0 following the old record"));
  EXPECT_FALSE(e0->leading());
  auto e1 = Make(1, &s1, [] { return false; });  // defers (to broker id 0)
  const auto started = std::chrono::steady_clock::now();
  e1->Start();
  ASSERT_TRUE(AwaitTrue([&] { return e0->leading(); }, 20s, "e0 leading"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10))
      << "e0 waited for the old record's lease";
  EXPECT_FALSE(e1->leading());
  auto key = etcd_client_->Get(BrokerKey("c1", "g1"));
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->mod_revision, e0->leading_term());
}

}  // namespace
}  // namespace tokimq::cluster
