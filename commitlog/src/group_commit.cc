// Sync rounds of GroupCommit (see commitlog/group_commit.h).
#include "commitlog/group_commit.h"

#include <algorithm>
#include <utility>

#include "common/hand_off_batch.h"

namespace tokimq {

GroupCommit::GroupCommit(int64_t durable, EndFn end, SyncFn sync, bool start_thread)
    : end_(std::move(end)), sync_(std::move(sync)), durable_(durable) {
  if (start_thread) {
    threaded_ = true;
    thread_ = std::thread([this] { Loop(); });
  }
}

GroupCommit::~GroupCommit() { Stop(); }

void GroupCommit::Submit(int64_t end, Done done) {
  absl::Status answer;
  bool run_here = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!failed_.ok()) {
      answer = failed_;
    } else if (end <= durable()) {
      answer = absl::OkStatus();
    } else {
      waiters_.push_back(Waiter{end, std::move(done)});
      new_waiters_ = true;
      if (threaded_) cv_.notify_one();
      // Without a thread, RunRound or Wait answers it; after Stop this caller runs the round.
      run_here = !threaded_ && stop_;
      if (!run_here) return;
    }
  }
  if (run_here) {
    RunRound();
    return;
  }
  if (answer.ok()) acknowledged_.fetch_add(1, std::memory_order_relaxed);
  std::move(done)(std::move(answer));
}

absl::Status GroupCommit::Wait(int64_t end) {
  struct Result {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
  } r;
  Submit(end, [&r](absl::Status s) {
    std::lock_guard<std::mutex> l(r.mu);
    r.status = std::move(s);
    r.done = true;
    r.cv.notify_one();
  });
  bool threaded;
  {
    std::lock_guard<std::mutex> l(mu_);
    threaded = threaded_;
  }
  std::unique_lock<std::mutex> l(r.mu);
  while (!r.done) {
    if (threaded) {
      r.cv.wait(l);
      continue;
    }
    // No sync thread (tests, or after Stop): this caller runs the round itself.
    l.unlock();
    RunRound();
    l.lock();
  }
  return r.status;
}

size_t GroupCommit::RunRound() {
  std::lock_guard<std::mutex> round(round_mu_);
  absl::Status s;
  {
    std::lock_guard<std::mutex> l(mu_);
    // Cleared even when a round before this one already answered them: the sync thread would
    // otherwise spin on a flag no round clears.
    new_waiters_ = false;
    if (waiters_.empty()) return 0;
    s = failed_;
  }
  const int64_t from = durable();
  int64_t to = from;
  if (s.ok()) {
    // Every waiter queued so far appended before it queued: the end read now covers them all.
    to = std::max(from, end_());
    if (to > from) {
      s = sync_(from, to);
      if (s.ok()) syncs_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  std::vector<Waiter> answer;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (s.ok()) {
      // Covered waiters are answered in the order they queued (a connection's sends queue in
      // its request order, and its answers keep it); the rest stay queued, in order too.
      answer.reserve(waiters_.size());
      size_t kept = 0;
      for (Waiter& w : waiters_) {
        if (w.end <= to) {
          answer.push_back(std::move(w));
        } else {
          if (&waiters_[kept] != &w) waiters_[kept] = std::move(w);
          ++kept;
        }
      }
      waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(kept), waiters_.end());
    } else {
      if (failed_.ok()) failed_ = s;
      answer.swap(waiters_);
    }
  }
  if (s.ok())
    acknowledged_.fetch_add(static_cast<int64_t>(answer.size()), std::memory_order_relaxed);
  {
    // What the answers hand to other threads (a send's response to its connection's I/O
    // thread) goes as one task per target thread when the round's answers are done.
    HandOffBatch batch;
    for (Waiter& w : answer) std::move(w.done)(s);
  }
  // Published only now that the round's answers are on their way: a send stored before this
  // round read the log's end but submitted after it took its waiters would otherwise be
  // answered inline at Submit (on its connection's I/O thread) ahead of the same connection's
  // earlier sends still in this round's batch. Until now it queues, and the next round answers
  // it (without an fsync when nothing new was appended).
  if (s.ok()) durable_.store(to, std::memory_order_release);
  return answer.size();
}

void GroupCommit::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    // Waiters left over by a round (queued after it read the log's end) set new_waiters_ when
    // they queued, so they get the next round; nothing spins on a waiter no round can cover.
    // On Stop the thread ends once no waiter is new: every one still queued was there when a
    // round read the log's end, so none can be covered (Stop answers them).
    if (!new_waiters_ && !stop_) {
      idle_ = true;
      idle_cv_.notify_all();
    }
    cv_.wait(l, [this] { return new_waiters_ || stop_; });
    idle_ = false;
    if (!new_waiters_) break;
    l.unlock();
    RunRound();
    l.lock();
  }
}

void GroupCommit::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> l(mu_);
    threaded_ = false;
  }
  while (RunRound() > 0) {
  }
  std::vector<Waiter> rest;
  {
    std::lock_guard<std::mutex> l(mu_);
    rest.swap(waiters_);
  }
  for (Waiter& w : rest) {
    std::move(w.done)(absl::FailedPreconditionError(
        "group commit stopped: the offset waited for is beyond the end of the log"));
  }
}

void GroupCommit::TEST_WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait(l, [this] { return idle_ && waiters_.empty(); });
}

size_t GroupCommit::TEST_queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return waiters_.size();
}

}  // namespace tokimq
