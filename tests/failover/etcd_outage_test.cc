// An etcd outage while a follower is frozen (found by a fresh tester, 2026-12-02): follower F2 is
// stopped (SIGSTOP) while the leader keeps acknowledging sync sends with the other follower F1;
// etcd is killed, the leader steps down, F2 resumes and etcd comes back with its data. F2's etcd
// client saw no failure (it was frozen) and is registered at once; the leader's and F1's clients
// come back later. Before GroupElection asked the peers it knew but that were not registered
// now, F2 campaigned alone ("peers: none") with the shorter log and won, and the rejoin of the
// others cut acknowledged sends. Asserted: the replica elected after the outage holds every
// byte the old leader acknowledged.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "client/admin.h"
#include "failover/broker_groups.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;

class EtcdOutageTest : public testing::BrokerGroupsTest {};

TEST_F(EtcdOutageTest, FollowerFrozenAcrossAnEtcdRestartDoesNotLeadWithAShorterLog) {
  const int g = AddGroup("g1", 3);  // sync, lease TTL 2 s
  ASSERT_FALSE(HasFailure());
  int64_t term = 0;
  const int leader = Leader(g, &term);
  ASSERT_GE(leader, 0);
  ASSERT_NO_FATAL_FAILURE(CreateDelayTopic("orders", 2, {g}));
  ASSERT_TRUE(CaughtUp(g));
  int frozen = -1;
  for (int i : groups_[g].members) {
    if (i != leader) frozen = i;
  }
  ASSERT_EQ(::kill(brokers_[frozen]->pid(), SIGSTOP), 0);
  // Acknowledged: the other follower holds each.
  ASSERT_NO_FATAL_FAILURE(SendDelayed(leader, "orders", 200, "acked-"));
  auto before = client::AdminClient(Quick(leader)).GroupStatus();
  ASSERT_TRUE(before.ok()) << before.status();
  const int64_t acked_end = before->max_offset();

  etcd_.Kill();
  std::this_thread::sleep_for(4s);  // past the TTL: the leader steps down
  ASSERT_EQ(::kill(brokers_[frozen]->pid(), SIGCONT), 0);
  ASSERT_TRUE(etcd_.Start()) << "etcd did not restart";
  const auto restarted = std::chrono::steady_clock::now();

  int64_t new_term = 0;
  const int next = WaitLeader(g, term, &new_term);
  if (next < 0) DumpLogs();
  ASSERT_GE(next, 0) << "no leader after the etcd restart";
  const auto leader_after = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - restarted);
  std::printf("a leader of term %lld %lld ms after etcd answered again\n",
              static_cast<long long>(new_term), static_cast<long long>(leader_after.count()));
  // The brokers' etcd channels reconnect within ~1 s of etcd answering (EtcdClient keeps them
  // connecting): 0.3-1.0 s release, where gRPC's 5 s backup poller alone made it 10-12 s. The
  // bound leaves room for ASan on a loaded machine.
  EXPECT_LT(leader_after, std::chrono::milliseconds(7'000));
  auto after = client::AdminClient(Quick(next)).GroupStatus();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->max_offset(), acked_end)
      << "replica " << next << (next == frozen ? " (the frozen one)" : "")
      << " leads term " << new_term << " without the acknowledged sends";
  if (HasFailure()) DumpLogs();
}

}  // namespace
}  // namespace tokimq
