// GroupCommit: the durability waits of an append-only log whose acknowledgements wait for an
// fsync (CommitLog under FlushMode::kSync), answered with as few fsyncs as the disk allows.
//
// A caller that appended bytes below `end` asks to be told when they are durable: Submit(end,
// done) queues a waiter and returns at once (done runs later, on the sync thread), Wait(end)
// blocks until then. One sync round takes every waiter queued so far, reads the log's end once,
// makes [durable, end) durable with one SyncFn call (one fdatasync of the active segment) and
// then answers every waiter at or below that end. While a round's fsync runs, new waiters queue
// up for the next round: with N sends in flight, one fdatasync acknowledges up to N of them
// (what Redis's appendfsync always gets from its event loop and PostgreSQL from its WAL
// flush; issue 21). No waiter is answered OK before the SyncFn call covering it has returned OK.
//
// Failure: a round whose SyncFn fails answers that error to every waiter queued (covered or
// not) and fails the GroupCommit for good: every later Submit/Wait answers the same error, and
// durable() never moves again (after a failed fsync the unsynced pages may be lost, so nothing
// after the last good round may be reported durable; house rule 3, as PostgreSQL since 2018).
//
// Threads: with `start_thread` a dedicated sync thread runs the rounds; without it (tests) rounds
// run only when RunRound() is called, and Wait() runs them on the calling thread. Every method
// may be called from any thread. `done` callbacks run on the thread that runs the round (or on
// the caller, inline, when the answer is known at Submit), outside every lock of this class:
// they must be short (post the answer elsewhere) and must not Wait() on this GroupCommit.
// A round answers its waiters in the order they were submitted, inside one HandOffBatch
// (common/hand_off_batch.h): a callback that hands its answer to another thread through
// HandOffBatch::Add has it delivered, with the round's other answers for that thread, in one
// task once the round's callbacks are done (one post per I/O thread per round, not per send).
// Lifetime: Stop() (also run by the destructor) lets the sync thread answer every queued waiter
// first, then joins it; after Stop, Submit/Wait run their round on the caller.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace tokimq {

class GroupCommit {
 public:
  // Makes every byte in [from, to) of the log durable (fdatasync), OK or the error.
  using SyncFn = std::function<absl::Status(int64_t from, int64_t to)>;
  // The log's end now (bytes appended so far, all handed to the OS).
  using EndFn = std::function<int64_t()>;
  using Done = absl::AnyInvocable<void(absl::Status) &&>;

  // `durable`: the end of the prefix already durable at start (bytes).
  GroupCommit(int64_t durable, EndFn end, SyncFn sync, bool start_thread);
  ~GroupCommit();
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Calls done(OK) once every byte below `end` is durable, done(error) if the round covering it
  // failed or the GroupCommit failed earlier. Inline when that is already known.
  void Submit(int64_t end, Done done);
  // Blocks until Submit(end) would have answered; returns that answer.
  absl::Status Wait(int64_t end);
  // Runs one round if a waiter is queued: one SyncFn call, answers the covered waiters. Returns
  // the number of waiters answered. Rounds never overlap (a second caller waits for the first).
  size_t RunRound();
  // Answers every queued waiter (running the rounds it takes), stops the sync thread. Idempotent.
  void Stop();

  int64_t durable() const { return durable_.load(std::memory_order_acquire); }
  // SyncFn calls that returned OK (one per round that had something to sync).
  int64_t syncs() const { return syncs_.load(std::memory_order_relaxed); }
  // Waiters answered OK so far.
  int64_t acknowledged() const { return acknowledged_.load(std::memory_order_relaxed); }
  // Waiters queued now (tests).
  size_t TEST_queued() const;
  // Blocks until the sync thread sleeps with no waiter queued (tests; it never returns while
  // the thread spins).
  void TEST_WaitIdle();

 private:
  struct Waiter {
    int64_t end;
    Done done;
  };
  void Loop();

  EndFn end_;
  SyncFn sync_;
  std::mutex round_mu_;  // one round at a time; taken before mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Waiter> waiters_;  // guarded by mu_
  absl::Status failed_;          // guarded by mu_; set once
  bool stop_ = false;            // guarded by mu_
  bool new_waiters_ = false;     // guarded by mu_: queued since the last round began
  bool idle_ = false;            // guarded by mu_: the sync thread waits for work
  std::condition_variable idle_cv_;
  bool threaded_ = false;  // guarded by mu_: the sync thread answers waiters
  std::atomic<int64_t> durable_;
  std::atomic<int64_t> syncs_{0};
  std::atomic<int64_t> acknowledged_{0};
  std::thread thread_;
};

}  // namespace tokimq
