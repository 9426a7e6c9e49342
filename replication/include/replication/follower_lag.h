// FollowerLag: how far each follower is behind its leader, in bytes and in ms (issue 20 item 6;
// docs/replication.md "Lag", docs/metrics.md).
//
// bytes: the leader's CommitLog end minus the end the follower last reported (a pull's
// from_offset). ms: the age of the oldest byte the follower does not hold yet, i.e. now minus
// the time the leader's end first passed the follower's end (0 when it holds everything). The
// leader samples its end (OnLeaderEnd) at every pull and every few ms; the ms figure is exact to
// that sampling period. A follower that stops pulling keeps its last report and its lag grows.
//
// Owned by the leader's ReplicationService, reset at each new term. Thread-safety: every method
// from any thread (one mutex). Time: ms of the injected Clock. Nothing is persisted.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/offsets.h"

namespace tokimq::replication {

class FollowerLag {
 public:
  explicit FollowerLag(Clock* clock) : clock_(clock) {}

  // The leader's CommitLog end now (bytes). Ends only grow; a smaller one is ignored.
  void OnLeaderEnd(PhysicalOffset end);
  // A pull of this term from `follower` (its broker id) reported holding every byte below
  // `acked`.
  void OnPull(const std::string& follower, PhysicalOffset acked);
  // Forgets every follower and sample (a new term).
  void Reset();

  struct Entry {
    std::string follower;
    PhysicalOffset acked_offset;  // the end it reported
    int64_t lag_bytes = 0;
    int64_t lag_ms = 0;
    int64_t last_pull_ms = 0;  // ms since its last pull
  };
  // One entry per follower that pulled since the last Reset, by follower id.
  std::vector<Entry> Snapshot() const;

 private:
  // Keeps samples above the lowest acknowledged end (and at most kMaxSamples).
  void TrimLocked();

  static constexpr size_t kMaxSamples = 100'000;
  Clock* clock_;
  mutable std::mutex mu_;
  PhysicalOffset end_;  // mu_: the largest end seen
  // mu_: (end, ms when first seen), ends strictly increasing.
  std::deque<std::pair<PhysicalOffset, int64_t>> samples_;
  struct Follower {
    PhysicalOffset acked;
    int64_t last_pull_ms = 0;
  };
  std::map<std::string, Follower> followers_;  // mu_
};

}  // namespace tokimq::replication
