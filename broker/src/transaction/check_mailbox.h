// CheckMailbox: the native check-back channel (docs/protocol.md "Transactions"). Producers
// long-poll it (PollTransactionChecks) for the checks of half messages of their topics; the
// TransactionService offers each due check to it.
//
// A topic has a live producer while a poll for it is waiting, or one ended less than live_ms
// ago (real time: liveness is about the producer's process, not the broker's manual clock).
// Offer queues the check for the topic's pollers and returns true, or returns false when no
// producer is live (the check still counts towards max checks). At most kMaxQueuedPerTopic
// checks wait per topic (the oldest is dropped; its half is checked again next interval).
//
// Thread-safety: all methods may be called from any thread. Shutdown() wakes every poll.
#pragma once

#include <condition_variable>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "proto/tokimq.pb.h"

namespace tokimq::broker {

class CheckMailbox {
 public:
  static constexpr size_t kMaxQueuedPerTopic = 10'000;
  explicit CheckMailbox(int64_t live_ms = 10'000) : live_ms_(live_ms) {}

  bool Offer(proto::TransactionCheck check);
  // Up to max_checks queued checks of `topics` (oldest first), waiting up to long_poll_ms
  // (real time) for the first one. Marks the topics live.
  std::vector<proto::TransactionCheck> Poll(const std::vector<std::string>& topics,
                                            int64_t long_poll_ms, int max_checks);
  void Shutdown();

 private:
  struct Topic {
    std::deque<proto::TransactionCheck> queued;
    int waiting = 0;
    std::chrono::steady_clock::time_point last_poll{};
  };
  void TakeLocked(const std::vector<std::string>& topics, int max,
                  std::vector<proto::TransactionCheck>* out);

  const int64_t live_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Topic> topics_;  // mu_
  bool shutdown_ = false;                // mu_
};

}  // namespace tokimq::broker
