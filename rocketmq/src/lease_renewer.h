// LeaseRenewer: server-side lease renewal for RocketMQ PushConsumers (ReceiveMessageRequest.
// auto_renew; RocketMQ 5's proxy does the same in its receipt handle manager). A push consumer
// never renews a lease itself: it hands the message to its listener and acks when the listener
// returns, however long that takes. The endpoint therefore tracks every message it handed out
// with auto_renew and, while it is not settled, extends its lease shortly before it ends, each
// time by `slice_ms`, until `max_ms` after the receive; then it stops and the lease runs out
// (the message comes back with attempt + 1, as a listener that hung would need).
//
// Receipt handles: a native renewal (ChangeInvisibleDuration) returns a new handle and the old
// one stops working, but the client only knows the handle it received. The renewer keeps, per
// client-known handle, the current native handle; Ack, ChangeInvisibleDuration and the DLQ
// forward of the endpoint Resolve() the client's handle before calling the broker, and Forget()
// it once the message is settled or the client took the lease over.
//
// Timing (RocketMQ proxy defaults: renew 10 s ahead, 60 s slices, stop after 3 h): a lease is
// renewed at the first RunOnce at or after `lease end - ahead_ms`. RunOnce is driven by a
// thread of the endpoint (every `period_ms` of real time) and by tests on a ManualClock.
//
// Memory: at most `max_entries` handles are tracked; beyond that a message is handed out
// without renewal (its lease is the receive's). Not durable: after a restart nothing is
// renewed and the leases run out.
// Thread-safety: every method may be called from any thread; RunOnce calls `renew` without the
// lock held, one handle at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"

namespace tokimq {
class Clock;
}

namespace tokimq::rocketmq {

struct LeaseRenewerOptions {
  int64_t ahead_ms = 10'000;          // renew when the lease ends within this (ms)
  int64_t slice_ms = 60'000;          // each renewal makes the lease end this long from now (ms)
  int64_t max_ms = 3LL * 3600 * 1000;  // no renewal this long after the receive (ms)
  size_t max_entries = 100'000;       // handles tracked at most
  int64_t period_ms = 1'000;          // the endpoint's RunOnce period (real time, ms)
};

// The renewer's timing for a push lease of `lease_ms` and a maximum of `max_ms` (0: none):
// renew min(10 s, lease / 2) ahead, by `lease_ms` each time.
LeaseRenewerOptions RenewerOptionsFor(int64_t lease_ms, int64_t max_ms);

class LeaseRenewer {
 public:
  // Renews the lease of `handle` in `group` to `invisible_ms` from now: the new handle, or an
  // error (the message was settled or its lease already ended: the entry is dropped).
  using RenewFn = std::function<absl::StatusOr<std::string>(
      const std::string& group, const std::string& handle, int64_t invisible_ms)>;

  LeaseRenewer(const Clock* clock, LeaseRenewerOptions options)
      : clock_(clock), options_(options) {}

  // Starts renewing the message received under `handle` by `client_id` in `group`, whose lease
  // ends at `lease_end_ms`. False when max_entries are tracked already (not renewed then).
  bool Track(const std::string& client_id, const std::string& group, const std::string& handle,
             int64_t lease_end_ms);
  // The current native handle for a handle the client holds (the same when not tracked).
  std::string Resolve(const std::string& client_handle) const;
  // Stops renewing (the message was acked, nacked, forwarded, or the client renewed it).
  void Forget(const std::string& client_handle);
  // Stops renewing every message of a client that said it terminates; its leases run out.
  void ForgetClient(const std::string& client_id);

  // Renews the leases due now (see the class comment). Returns the number renewed.
  int RunOnce(const RenewFn& renew);

  size_t size() const;
  const LeaseRenewerOptions& options() const { return options_; }

 private:
  struct Entry {
    std::string client_id;
    std::string group;
    std::string current;     // native handle of the live lease
    int64_t received_ms = 0;
    int64_t lease_end_ms = 0;
  };

  const Clock* const clock_;
  const LeaseRenewerOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // by client-known handle
};

}  // namespace tokimq::rocketmq
