// LeaseFence: until when an elected leader may still act on its etcd lease (issue 20,
// docs/cluster.md "Election and fencing").
//
// etcd starts a lease's TTL again when it *receives* a keepalive, which is after the leader
// *sent* it. So if a keepalive sent at local time s succeeded with TTL t, etcd cannot expire the
// lease, and so cannot let another replica win the group's leader key, before s + t (measured
// on etcd's clock, whose rate matches ours up to drift). The leader stops acknowledging at
// s + t - margin: it steps down before any successor can exist, even when it cannot reach etcd
// to learn it lost. The margin covers clock-rate drift and the delay of the step-down itself.
//
// Times are ms of one monotonic clock (the caller's; tests pass a ManualClock's). Pure value
// type; not thread-safe (the election thread owns it).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tokimq::cluster {

class LeaseFence {
 public:
  // margin_ms: how long before the earliest possible expiry the leader stops.
  explicit LeaseFence(int64_t margin_ms) : margin_ms_(margin_ms) {}

  // A grant or keepalive sent at sent_ms succeeded with `ttl_s` (etcd's answer). The fence never
  // moves back (an older round answering late changes nothing).
  void Renewed(int64_t sent_ms, int64_t ttl_s) {
    valid_until_ms_ = std::max(valid_until_ms_, sent_ms + ttl_s * 1000 - margin_ms_);
  }
  // The lease is gone (revoked, expired, lost the key): invalid from now on.
  void Reset() { valid_until_ms_ = 0; }
  // True while a leader holding this lease may acknowledge writes.
  bool Valid(int64_t now_ms) const { return now_ms < valid_until_ms_; }
  int64_t valid_until_ms() const { return valid_until_ms_; }

 private:
  int64_t margin_ms_;
  int64_t valid_until_ms_ = 0;
};

}  // namespace tokimq::cluster
