// GroupCommit: many durability waits share one sync, none is answered before the sync covering
// it returned, a failed sync fails every waiter and everything after. Rounds are driven by
// RunRound on the test thread (no sync thread, no sleeps), except the one test of the thread.
#include "commitlog/group_commit.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

namespace tokimq {
namespace {

struct SyncCall {
  int64_t from;
  int64_t to;
};

class GroupCommitTest : public ::testing::Test {
 protected:
  // A GroupCommit over a fake log whose end is log_end_ and whose sync records its calls and
  // answers sync_status_.
  std::unique_ptr<GroupCommit> Make(int64_t durable = 0, bool thread = false) {
    return std::make_unique<GroupCommit>(
        durable, [this] { return log_end_; },
        [this](int64_t from, int64_t to) {
          // No waiter may have been answered by this round before its sync is done.
          answered_during_sync_ += answered_ - answered_at_round_start_;
          calls_.push_back({from, to});
          if (during_sync_) during_sync_();
          sync_returned_ = static_cast<int>(calls_.size());
          return sync_status_;
        },
        thread);
  }
  // A waiter that records its answer and how many syncs had returned when it was answered.
  GroupCommit::Done Waiter(int i) {
    return [this, i](absl::Status s) {
      answers_[i] = s;
      syncs_before_answer_[i] = sync_returned_;
      ++answered_;
    };
  }
  void Reserve(int n) {
    answers_.assign(n, absl::UnknownError("not answered"));
    syncs_before_answer_.assign(n, -1);
  }

  int64_t log_end_ = 0;
  absl::Status sync_status_;
  std::function<void()> during_sync_;
  std::vector<SyncCall> calls_;
  int sync_returned_ = 0;
  int answered_ = 0;
  int answered_at_round_start_ = 0;
  int answered_during_sync_ = 0;
  std::vector<absl::Status> answers_;
  std::vector<int> syncs_before_answer_;
};

TEST_F(GroupCommitTest, HundredWaitersShareOneSyncAnsweredOnlyAfterItReturned) {
  auto gc = Make();
  Reserve(100);
  for (int i = 0; i < 100; ++i) {
    log_end_ += 150;  // one 150-byte record appended, then its wait queued
    gc->Submit(log_end_, Waiter(i));
  }
  EXPECT_EQ(answered_, 0);  // nothing is answered before a round
  EXPECT_EQ(gc->TEST_queued(), 100u);
  EXPECT_EQ(gc->RunRound(), 100u);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].from, 0);
  EXPECT_EQ(calls_[0].to, 15000);
  EXPECT_EQ(answered_during_sync_, 0);
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(answers_[i].ok()) << i;
    EXPECT_EQ(syncs_before_answer_[i], 1) << i;
  }
  EXPECT_EQ(gc->durable(), 15000);
  EXPECT_EQ(gc->syncs(), 1);
  EXPECT_EQ(gc->acknowledged(), 100);
  EXPECT_EQ(gc->RunRound(), 0u);  // nothing queued: no sync
  EXPECT_EQ(calls_.size(), 1u);
}

TEST_F(GroupCommitTest, WaiterQueuedDuringASyncWaitsForTheNextSync) {
  auto gc = Make();
  Reserve(3);
  log_end_ = 100;
  gc->Submit(100, Waiter(0));
  // While the first sync runs, two more records are appended and their waits queued.
  during_sync_ = [&] {
    during_sync_ = nullptr;
    log_end_ = 300;
    gc->Submit(200, Waiter(1));
    gc->Submit(300, Waiter(2));
  };
  EXPECT_EQ(gc->RunRound(), 1u);
  EXPECT_TRUE(answers_[0].ok());
  EXPECT_EQ(answered_, 1);  // the first sync covered [0, 100) only
  EXPECT_EQ(gc->durable(), 100);
  EXPECT_EQ(gc->RunRound(), 2u);
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1].from, 100);
  EXPECT_EQ(calls_[1].to, 300);
  EXPECT_EQ(syncs_before_answer_[1], 2);
  EXPECT_EQ(syncs_before_answer_[2], 2);
  EXPECT_TRUE(answers_[2].ok());
}

TEST_F(GroupCommitTest, WaitForAnAlreadyDurableOffsetIsAnsweredInlineWithoutASync) {
  auto gc = Make(/*durable=*/500);
  Reserve(1);
  log_end_ = 500;
  gc->Submit(400, Waiter(0));
  EXPECT_EQ(answered_, 1);
  EXPECT_TRUE(answers_[0].ok());
  EXPECT_TRUE(calls_.empty());
}

TEST_F(GroupCommitTest, FailedSyncFailsEveryWaiterAndNothingAfterIsReportedDurable) {
  auto gc = Make();
  Reserve(6);
  log_end_ = 100;
  gc->Submit(100, Waiter(0));
  ASSERT_EQ(gc->RunRound(), 1u);
  ASSERT_TRUE(answers_[0].ok());

  sync_status_ = absl::InternalError("injected fsync failure");
  log_end_ = 400;
  gc->Submit(200, Waiter(1));
  gc->Submit(400, Waiter(2));
  during_sync_ = [&] {  // queued while the failing sync runs, beyond what it covers
    during_sync_ = nullptr;
    log_end_ = 500;
    gc->Submit(500, Waiter(3));
  };
  EXPECT_EQ(gc->RunRound(), 3u);
  for (int i : {1, 2, 3}) {
    EXPECT_EQ(answers_[i].code(), absl::StatusCode::kInternal) << i;
    EXPECT_NE(answers_[i].message().find("injected fsync failure"), std::string::npos);
  }
  EXPECT_EQ(gc->durable(), 100);

  // The disk recovers; the GroupCommit stays failed and syncs nothing more.
  sync_status_ = absl::OkStatus();
  gc->Submit(500, Waiter(4));
  EXPECT_EQ(answers_[4].code(), absl::StatusCode::kInternal);
  EXPECT_EQ(gc->Wait(500).code(), absl::StatusCode::kInternal);
  gc->Submit(50, Waiter(5));  // even below the old durable end: the log is failed
  EXPECT_EQ(answers_[5].code(), absl::StatusCode::kInternal);
  EXPECT_EQ(gc->RunRound(), 0u);
  EXPECT_EQ(calls_.size(), 2u);
  EXPECT_EQ(gc->durable(), 100);
  EXPECT_EQ(gc->syncs(), 1);
  EXPECT_EQ(gc->acknowledged(), 1);
}

TEST_F(GroupCommitTest, WaitWithoutAThreadRunsTheRoundOnTheCaller) {
  auto gc = Make();
  log_end_ = 64;
  EXPECT_TRUE(gc->Wait(64).ok());
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(gc->durable(), 64);
}

// The sync thread: waits queued while its fsync runs are answered together by its next round,
// on the sync thread, after that round's fsync returned.
TEST_F(GroupCommitTest, SyncThreadAnswersWaitersQueuedDuringAnFsyncWithOneMoreFsync) {
  std::promise<void> entered, gate;
  std::shared_future<void> gate_open = gate.get_future().share();
  std::vector<SyncCall> calls;  // written by the sync thread only
  std::thread::id sync_thread;
  int64_t end = 10;
  std::mutex end_mu;
  GroupCommit gc(
      0,
      [&] {
        std::lock_guard<std::mutex> l(end_mu);
        return end;
      },
      [&](int64_t from, int64_t to) {
        calls.push_back({from, to});
        sync_thread = std::this_thread::get_id();
        if (calls.size() == 1) {
          entered.set_value();
          gate_open.wait();  // the first fsync is slow
        }
        return absl::OkStatus();
      },
      /*start_thread=*/true);
  constexpr int kWaiters = 50;
  std::promise<void> all_answered;
  std::atomic<int> answered{0}, bad{0};
  std::vector<std::thread::id> answered_on(kWaiters + 1);
  auto waiter = [&](int i, int expected_syncs) {
    return [&, i, expected_syncs](absl::Status s) {
      answered_on[i] = std::this_thread::get_id();
      if (!s.ok() || static_cast<int>(calls.size()) != expected_syncs) ++bad;
      if (++answered == kWaiters + 1) all_answered.set_value();
    };
  };
  gc.Submit(10, waiter(0, 1));
  entered.get_future().wait();  // the first round is inside its fsync of [0, 10)
  {
    std::lock_guard<std::mutex> l(end_mu);
    end = 10 + kWaiters * 10;
  }
  for (int i = 1; i <= kWaiters; ++i) gc.Submit(10 + i * 10, waiter(i, 2));
  EXPECT_EQ(answered.load(), 0);
  gate.set_value();
  all_answered.get_future().wait();
  gc.Stop();
  EXPECT_EQ(bad.load(), 0);
  ASSERT_EQ(calls.size(), 2u);  // 51 waits, 2 fsyncs
  EXPECT_EQ(calls[1].from, 10);
  EXPECT_EQ(calls[1].to, 10 + kWaiters * 10);
  EXPECT_NE(sync_thread, std::this_thread::get_id());
  for (const auto& id : answered_on) EXPECT_EQ(id, sync_thread);
  EXPECT_EQ(gc.acknowledged(), kWaiters + 1);
}

// A wait queued while a round's fsync runs and covered by that round sets the "new waiter"
// flag; the sync thread must clear it and sleep, not spin on it (it did: 100 % of a core).
TEST_F(GroupCommitTest, SyncThreadSleepsAfterARoundThatAnsweredAWaitQueuedDuringIt) {
  std::promise<void> entered, gate;
  std::shared_future<void> gate_open = gate.get_future().share();
  std::atomic<int> syncs{0};
  GroupCommit gc(
      0, [] { return int64_t{100}; },
      [&](int64_t, int64_t) {
        if (syncs.fetch_add(1) == 0) {
          entered.set_value();
          gate_open.wait();
        }
        return absl::OkStatus();
      },
      /*start_thread=*/true);
  std::promise<void> p1, p2;
  gc.Submit(50, [&](absl::Status) { p1.set_value(); });
  entered.get_future().wait();
  gc.Submit(100, [&](absl::Status) { p2.set_value(); });  // covered by the running round
  gate.set_value();
  p1.get_future().wait();
  p2.get_future().wait();
  gc.TEST_WaitIdle();  // never returns if the thread spins
  EXPECT_EQ(syncs.load(), 1);
  EXPECT_EQ(gc.acknowledged(), 2);
}

TEST_F(GroupCommitTest, StopAnswersQueuedWaitersFirst) {
  auto gc = Make();
  Reserve(2);
  log_end_ = 20;
  gc->Submit(10, Waiter(0));
  gc->Submit(20, Waiter(1));
  gc->Stop();
  EXPECT_TRUE(answers_[0].ok());
  EXPECT_TRUE(answers_[1].ok());
  EXPECT_EQ(calls_.size(), 1u);
}

}  // namespace
}  // namespace tokimq
