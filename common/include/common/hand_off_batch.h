// HandOffBatch: while one thread runs a burst of callbacks that each hand a short task to
// another thread (the group commit's sync thread answering the sends one fdatasync covered:
// every answer goes to the I/O thread of its connection), the tasks bound for the same target
// are collected and handed over as ONE task per target when the burst ends, instead of one
// hand-off (a post: a queue lock, and a wake of the target's thread when it sleeps) per task
// (issue 21 item 1, docs/performance.md "Round 3").
//
// Use: the thread running the burst opens a batch for its duration (`HandOffBatch batch;`,
// GroupCommit::RunRound does); a callback that would post a task calls HandOffBatch::Add,
// which queues it when the calling thread has a batch open and returns false otherwise (the
// caller then posts it itself, as without batching). When the batch closes (destructor, or
// Flush), each target's PostFn is called once with that target's tasks in the order they were
// added; the target's thread then runs them in that order. So tasks of one target keep their
// order (what keeps a connection's answers in order), and tasks of different targets are
// independent, as separate posts were.
//
// Targets are opaque (the broker's are asio::io_context pointers); the PostFn of a target must
// be the same for every Add with that target (the first one given is used).
//
// Thread-safety: a batch belongs to the thread that opened it (it is found through a
// thread-local pointer); Add touches only the calling thread's batch. Batches nest: an inner
// batch collects while it is open, and flushes into its targets (not into the outer batch).
// Lifetime: not copyable or movable; it must close on the thread that opened it. A batch that
// closes during a stack unwind still hands over what it holds (the answers are never lost).
#pragma once

#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"

namespace tokimq {

class HandOffBatch {
 public:
  using Task = absl::AnyInvocable<void() &&>;
  // Hands `tasks` (in order, never empty) to the thread behind `target` as one unit of work,
  // where they must run in that order. Called on the batch's thread when it flushes.
  using PostFn = void (*)(void* target, std::vector<Task> tasks);

  HandOffBatch();
  ~HandOffBatch();
  HandOffBatch(const HandOffBatch&) = delete;
  HandOffBatch& operator=(const HandOffBatch&) = delete;

  // Queues `task` for `target` in the calling thread's open batch and returns true; returns
  // false (task untouched) when the calling thread has no batch open.
  static bool Add(void* target, PostFn post, Task& task);

  // Hands over everything queued so far: one PostFn call per target that has tasks, targets in
  // the order of their first task. The batch stays open.
  void Flush();

  // PostFn calls made by Flush so far, and tasks handed over (tests, metrics).
  size_t posts() const { return posts_; }
  size_t tasks() const { return tasks_; }

 private:
  struct Target {
    void* target;
    PostFn post;
    std::vector<Task> tasks;
  };
  // Few targets per burst (one per I/O thread): a vector searched linearly.
  std::vector<Target> targets_;
  HandOffBatch* outer_;
  size_t posts_ = 0;
  size_t tasks_ = 0;
};

}  // namespace tokimq
