// GroupCommit: many durability waits share one sync, none is answered before the sync covering
// it returned, a failed sync fails every waiter and everything after. Rounds are driven by
// RunRound on the test thread (no sync thread, no sleeps), except the one test of the thread.
#include "commitlog/group_commit.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/hand_off_batch.h"

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

// The broker's connections hand a send's answer to their I/O thread through HandOffBatch::Add
// (broker/src/connection.cc); these fakes stand for two I/O threads and the answers they get.
struct FakeIoThread {
  std::vector<std::vector<HandOffBatch::Task>> posts;  // one entry per post, its tasks
  static void Post(void* io, std::vector<HandOffBatch::Task> tasks) {
    static_cast<FakeIoThread*>(io)->posts.push_back(std::move(tasks));
  }
  // Runs every posted task, as the I/O thread would, in post order.
  void RunAll() {
    for (auto& post : posts) {
      for (auto& t : post) std::move(t)();
    }
  }
};

struct Answer {
  std::string connection;
  int send;
  absl::Status status;
};

// A send of `connection` (served by `io`): its answer is handed to the I/O thread as
// Connection::Complete does (in the open batch, else posted alone), and recorded in `log`
// when the I/O thread runs it.
GroupCommit::Done SendAnswer(FakeIoThread* io, std::string connection, int send,
                             std::vector<Answer>* log) {
  return [io, connection = std::move(connection), send, log](absl::Status s) {
    HandOffBatch::Task task = [log, connection, send, s] { log->push_back({connection, send, s}); };
    if (!HandOffBatch::Add(io, &FakeIoThread::Post, task)) {
      std::vector<HandOffBatch::Task> one;
      one.push_back(std::move(task));
      FakeIoThread::Post(io, std::move(one));
    }
  };
}

TEST_F(GroupCommitTest, RoundHandsItsAnswersToEachIoThreadInOnePost) {
  auto gc = Make();
  FakeIoThread io1, io2;
  std::vector<Answer> log1, log2;
  // Connections a and b on io1, c on io2; 12 sends interleaved as they would arrive.
  for (int i = 0; i < 4; ++i) {
    log_end_ += 100;
    gc->Submit(log_end_, SendAnswer(&io1, "a", i, &log1));
    log_end_ += 100;
    gc->Submit(log_end_, SendAnswer(&io2, "c", i, &log2));
    log_end_ += 100;
    gc->Submit(log_end_, SendAnswer(&io1, "b", i, &log1));
  }
  EXPECT_EQ(gc->RunRound(), 12u);
  ASSERT_EQ(calls_.size(), 1u);
  ASSERT_EQ(io1.posts.size(), 1u);  // not 8
  ASSERT_EQ(io2.posts.size(), 1u);  // not 4
  EXPECT_EQ(io1.posts[0].size(), 8u);
  EXPECT_EQ(io2.posts[0].size(), 4u);
  io1.RunAll();
  io2.RunAll();
  // Each connection's answers in its send order (and here: in the order submitted).
  ASSERT_EQ(log1.size(), 8u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(log1[2 * i].connection, "a");
    EXPECT_EQ(log1[2 * i].send, i);
    EXPECT_EQ(log1[2 * i + 1].connection, "b");
    EXPECT_EQ(log1[2 * i + 1].send, i);
    EXPECT_TRUE(log1[2 * i].status.ok());
  }
  ASSERT_EQ(log2.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(log2[i].send, i);
  // A second round posts again (the batch is per round, nothing held back).
  log_end_ += 100;
  gc->Submit(log_end_, SendAnswer(&io1, "a", 4, &log1));
  EXPECT_EQ(gc->RunRound(), 1u);
  EXPECT_EQ(io1.posts.size(), 2u);
  EXPECT_EQ(io2.posts.size(), 1u);
}

TEST_F(GroupCommitTest, RoundKeepsEachConnectionsOrderWhenLaterWaitersStayQueued) {
  auto gc = Make();
  FakeIoThread io;
  std::vector<Answer> log;
  // Connection a's sends are covered by the first round; b's were appended after the round
  // read the log's end (here: queued above it) and wait for the next. Interleaved in the
  // queue, a's answers must still come out in a's order.
  log_end_ = 1000;
  for (int i = 0; i < 5; ++i) {
    gc->Submit(100 * (i + 1), SendAnswer(&io, "a", i, &log));
    gc->Submit(2000 + 100 * i, SendAnswer(&io, "b", i, &log));
  }
  EXPECT_EQ(gc->RunRound(), 5u);
  io.RunAll();
  ASSERT_EQ(log.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(log[i].connection, "a");
    EXPECT_EQ(log[i].send, i) << "answer " << i;
  }
  log_end_ = 3000;
  EXPECT_EQ(gc->RunRound(), 5u);
  io.posts.erase(io.posts.begin());  // already run
  io.RunAll();
  ASSERT_EQ(log.size(), 10u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(log[5 + i].connection, "b");
    EXPECT_EQ(log[5 + i].send, i) << "answer " << 5 + i;
  }
}

TEST_F(GroupCommitTest, FailedRoundFansTheErrorOutToEverySendInOnePostPerIoThread) {
  auto gc = Make();
  FakeIoThread io1, io2;
  std::vector<Answer> log1, log2;
  for (int i = 0; i < 6; ++i) {
    log_end_ += 100;
    gc->Submit(log_end_, SendAnswer(i % 2 == 0 ? &io1 : &io2, i % 2 == 0 ? "a" : "c", i,
                                    i % 2 == 0 ? &log1 : &log2));
  }
  // One more queued above the log's end: not covered by the round, failed by it all the same.
  gc->Submit(log_end_ + 500, SendAnswer(&io1, "a", 6, &log1));
  sync_status_ = absl::InternalError("injected fsync failure");
  EXPECT_EQ(gc->RunRound(), 7u);
  ASSERT_EQ(io1.posts.size(), 1u);
  ASSERT_EQ(io2.posts.size(), 1u);
  io1.RunAll();
  io2.RunAll();
  ASSERT_EQ(log1.size(), 4u);
  ASSERT_EQ(log2.size(), 3u);
  for (const auto* log : {&log1, &log2}) {
    for (size_t i = 0; i < log->size(); ++i) {
      EXPECT_EQ((*log)[i].status.code(), absl::StatusCode::kInternal) << i;
      if (i > 0) {
        EXPECT_LT((*log)[i - 1].send, (*log)[i].send);
      }
    }
  }
  EXPECT_EQ(gc->acknowledged(), 0);
  EXPECT_EQ(gc->durable(), 0);
}

TEST_F(GroupCommitTest, SendSubmittedWhileARoundAnswersComesAfterThatRoundsAnswers) {
  auto gc = Make();
  FakeIoThread io;
  std::vector<Answer> log;
  // Connection x stored send 0 and send 1; the round reads the log's end after both appends
  // but only send 0 was queued. Send 1 is submitted from x's I/O thread (another thread, no
  // batch open there) while the round is answering send 0.
  log_end_ = 200;
  GroupCommit::Done first = SendAnswer(&io, "x", 0, &log);
  gc->Submit(100, [&](absl::Status s) {
    std::move(first)(s);  // into the round's batch, not posted yet
    std::thread io_thread([&] { gc->Submit(200, SendAnswer(&io, "x", 1, &log)); });
    io_thread.join();
  });
  EXPECT_EQ(gc->RunRound(), 1u);
  // Send 1 was not answered inline ahead of send 0's post: it waits for the next round.
  ASSERT_EQ(io.posts.size(), 1u);
  EXPECT_EQ(gc->TEST_queued(), 1u);
  EXPECT_EQ(gc->durable(), 200);
  EXPECT_EQ(gc->RunRound(), 1u);
  EXPECT_EQ(calls_.size(), 1u);  // nothing new to sync: answered without another fsync
  io.RunAll();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].send, 0);
  EXPECT_EQ(log[1].send, 1);
  EXPECT_TRUE(log[1].status.ok());
}

TEST_F(GroupCommitTest, AnswerKnownAtSubmitIsPostedAloneOnTheCaller) {
  auto gc = Make(/*durable=*/500);
  FakeIoThread io;
  std::vector<Answer> log;
  gc->Submit(400, SendAnswer(&io, "a", 0, &log));  // already durable: answered inline
  ASSERT_EQ(io.posts.size(), 1u);
  io.RunAll();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_TRUE(log[0].status.ok());
}

}  // namespace
}  // namespace tokimq
