// Two broker groups in one run (issue 20 item 7: "follower kill and catch-up; etcd restart"):
// etcd + group g1 of two replicas and group g2 of three, sync mode, one delayed topic placed on
// both, under the checked load (failover/load.h). In order:
//   1. kill -9 of a g2 follower under load: g2's leader keeps acknowledging (its other
//      follower acks); the load goes on; the follower restarts with its data and catches up from
//      its own end;
//   2. kill -9 of g1's only follower and a restart with its data: while it is down g1 cannot
//      acknowledge a sync send (the routed load goes to g2), afterwards it catches up;
//   3. etcd killed and restarted with its data under load: both groups have a leader again and
//      sends are acknowledged;
// and at the end every follower's CommitLog end equals its leader's and the checker counts 0
// acknowledged sends lost, 0 early, 0 phantom.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "client/admin.h"
#include "failover/broker_groups.h"
#include "failover/history.h"
#include "failover/load.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;
using testing::AwaitTrue;
using testing::History;
using testing::NowMs;

class TwoGroupsTest : public testing::BrokerGroupsTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(BrokerGroupsTest::SetUp());
    g1_ = AddGroup("g1", 2);
    g2_ = AddGroup("g2", 3);
    ASSERT_FALSE(HasFailure());
  }
  // A follower of group g (a brokers_ index): the first member that is not `leader`.
  int Follower(int g, int leader) const {
    for (int i : groups_[g].members) {
      if (i != leader) return i;
    }
    return -1;
  }
  // Kills follower f with SIGKILL, keeps the load going for `sends` acknowledged sends, then
  // restarts f on its address with its data dir. Returns the ms it was down.
  int64_t KillAndRestartFollower(int f, int64_t sends, testing::CheckedLoad* load) {
    const int64_t killed_at = NowMs();
    brokers_[f]->Kill();
    if (sends > 0) {
      EXPECT_TRUE(load->AwaitSends(sends)) << "the load stopped with a follower down";
    }
    brokers_[f]->set_fixed_port(brokers_[f]->port());
    EXPECT_TRUE(brokers_[f]->Start()) << "restart on port " << brokers_[f]->port();
    return NowMs() - killed_at;
  }

  int g1_ = -1, g2_ = -1;
};

TEST_F(TwoGroupsTest, FollowerKillAndEtcdRestartUnderLoadLoseNothing) {
  int64_t t1 = 0, t2 = 0;
  const int l1 = Leader(g1_, &t1);
  const int l2 = Leader(g2_, &t2);
  ASSERT_GE(l1, 0);
  ASSERT_GE(l2, 0);
  ASSERT_NO_FATAL_FAILURE(CreateDelayTopic("orders", 2, {g1_, g2_}));
  ASSERT_TRUE(CaughtUp(g1_));
  ASSERT_TRUE(CaughtUp(g2_));

  History history;
  testing::CheckedLoad load(AllBrokers(), &history);
  load.Start();
  ASSERT_TRUE(load.AwaitSends(300));

  // 1. A g2 follower: the other follower acks g2's sends meanwhile.
  const int f2 = Follower(g2_, l2);
  const int64_t down2 = KillAndRestartFollower(f2, 300, &load);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(CaughtUpUnderLoad(g2_)) << "the restarted g2 follower did not catch up";
  std::printf("g2 follower %d down %lld ms; caught up\n", f2, static_cast<long long>(down2));

  // 2. g1's only follower: g1 acknowledges nothing while it is down (sync needs a follower);
  // restarted at once, it catches up and g1 acknowledges again.
  ASSERT_TRUE(load.AwaitSends(100));
  const int f1 = Follower(g1_, l1);
  const int64_t down1 = KillAndRestartFollower(f1, 0, &load);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(CaughtUpUnderLoad(g1_)) << "the restarted g1 follower did not catch up";
  std::printf("g1 follower %d down %lld ms; caught up\n", f1, static_cast<long long>(down1));
  ASSERT_TRUE(load.AwaitSends(300));

  // 3. etcd killed and restarted with its data, under load.
  const int64_t etcd_killed_at = NowMs();
  etcd_.Kill();
  std::this_thread::sleep_for(500ms);  // etcd down for a moment on top of its start-up time
  ASSERT_TRUE(etcd_.Start()) << "etcd did not restart";
  const int64_t etcd_back_ms = NowMs() - etcd_killed_at;
  int64_t t1b = 0, t2b = 0;
  ASSERT_GE(Leader(g1_, &t1b), 0) << "g1 has no leader after the etcd restart";
  ASSERT_GE(Leader(g2_, &t2b), 0) << "g2 has no leader after the etcd restart";
  const int64_t acked_then = load.acked();
  ASSERT_TRUE(load.AwaitSends(300)) << "no sends acknowledged after the etcd restart";
  std::printf(
      "etcd back after %lld ms; terms g1 %lld -> %lld, g2 %lld -> %lld; %lld sends acknowledged "
      "before the next 300\n",
      static_cast<long long>(etcd_back_ms), static_cast<long long>(t1),
      static_cast<long long>(t1b), static_cast<long long>(t2), static_cast<long long>(t2b),
      static_cast<long long>(acked_then));

  load.Drain();
  // Every follower level with its leader (the load stopped: the ends are final).
  EXPECT_TRUE(CaughtUp(g1_));
  EXPECT_TRUE(CaughtUp(g2_));
  if (HasFailure()) DumpLogs();

  testing::ExpectSyncGuarantees(history);
  // Both groups delivered: copies of g1 and of g2 were received.
  EXPECT_GT(history.ReceiptsFrom("g1"), 0);
  EXPECT_GT(history.ReceiptsFrom("g2"), 0);
}

}  // namespace
}  // namespace tokimq
