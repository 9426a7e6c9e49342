// TimerStore::AdoptReplicatedLog (issue 20 item 3): a follower's timer store that takes over
// from a leader releases each message the leader had not released yet, once, never early, and
// none of those the leader already released (their delivered copies are in the copied log).
#include <gtest/gtest.h>

#include "timer_env.h"

namespace tokimq::testing {
namespace {

class TimerReplicaPromotionTest : public ::testing::Test {
 protected:
  TimerReplicaPromotionTest() : leader_(100), follower_(100) {}

  void SetUp() override {
    leader_.Open();
    follower_.Open();  // a follower opens its stores before anything is replicated
    base_ = leader_.clock().NowMs();
  }

  // Copies the leader's CommitLog to the follower's byte for byte (the replication path).
  void Replicate() {
    CommitLog* from = leader_.ms().commit_log();
    while (follower_.ms().commit_log()->MaxOffset() < from->MaxOffset()) {
      auto chunk = from->ReadChunk(follower_.ms().commit_log()->MaxOffset(), 4096);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      auto end = follower_.ms().AppendReplicated(*chunk);
      ASSERT_TRUE(end.ok()) << end.status();
    }
  }

  void SendBatch(int first, int n) {
    for (int i = first; i < first + n; ++i) {
      leader_.Send("m" + std::to_string(i), base_ + 300 + i * 50);
    }
    leader_.Ack();
  }

  TimerEnv leader_;
  TimerEnv follower_;
  int64_t base_ = 0;
};

TEST_F(TimerReplicaPromotionTest, PromotedFollowerDoesNotRepeatTheLeadersReleases) {
  SendBatch(0, 40);
  leader_.AdvanceTo(base_ + 300 + 19 * 50);  // m0..m19 released by the leader
  leader_.Ack();
  ASSERT_EQ(leader_.Delivered().size(), 20u);
  Replicate();
  // The leader dies here. The follower is promoted a little later.
  follower_.clock().SetMs(base_ + 300 + 25 * 50);
  ASSERT_TRUE(follower_.ts().AdoptReplicatedLog().ok());
  follower_.AdvanceTo(base_ + 300 + 40 * 50);
  // The follower's real topic holds the leader's 20 copies plus its own 20 releases.
  follower_.CheckHistory(leader_.sent());
  EXPECT_EQ(follower_.ts().metrics().delivered.Value(), 20);
  EXPECT_EQ(follower_.ts().metrics().pending.Value(), 0);
}

TEST_F(TimerReplicaPromotionTest, FollowerRestartedBeforePromotionStillSkipsReleasedMessages) {
  SendBatch(0, 20);
  leader_.AdvanceTo(base_ + 300 + 4 * 50);  // m0..m4 released
  Replicate();
  // The follower restarts: its recovery enqueues the replicated timer topic (pins its records).
  follower_.clock().SetMs(leader_.clock().NowMs());
  follower_.CleanRestart();
  SendBatch(20, 20);
  leader_.AdvanceTo(base_ + 300 + 29 * 50);  // m5..m29 released after the follower's restart
  Replicate();
  follower_.clock().SetMs(leader_.clock().NowMs());
  ASSERT_TRUE(follower_.ts().AdoptReplicatedLog().ok());
  follower_.AdvanceTo(base_ + 300 + 40 * 50);
  follower_.CheckHistory(leader_.sent());
  EXPECT_EQ(follower_.ts().metrics().delivered.Value(), 10);
}

TEST_F(TimerReplicaPromotionTest, RecallOnTheLeaderHoldsOnThePromotedFollower) {
  SendBatch(0, 10);
  ScheduleResult r = leader_.Send("recalled", base_ + 5'000);
  ASSERT_TRUE(leader_.ts().Recall(r.recall_handle).ok());
  leader_.Ack();
  leader_.AdvanceTo(base_ + 300 + 4 * 50);
  Replicate();
  follower_.clock().SetMs(leader_.clock().NowMs());
  ASSERT_TRUE(follower_.ts().AdoptReplicatedLog().ok());
  follower_.AdvanceTo(base_ + 10'000);
  std::map<std::string, int64_t> expected = leader_.sent();
  expected.erase("recalled");
  follower_.CheckHistory(expected);
}

TEST_F(TimerReplicaPromotionTest, CrashRightAfterPromotionStillSkipsReleasedMessages) {
  SendBatch(0, 30);
  leader_.AdvanceTo(base_ + 300 + 14 * 50);  // m0..m14 released
  Replicate();
  follower_.clock().SetMs(leader_.clock().NowMs());
  ASSERT_TRUE(follower_.ts().AdoptReplicatedLog().ok());
  follower_.AdvanceTo(base_ + 300 + 20 * 50);
  // kill -9 of the new leader before its dedup window closed: recovery must find the old
  // leader's copies again (the checkpoint kept the scan start).
  follower_.Kill();
  follower_.AdvanceTo(base_ + 300 + 30 * 50);
  follower_.CheckHistory(leader_.sent());
}

}  // namespace
}  // namespace tokimq::testing
