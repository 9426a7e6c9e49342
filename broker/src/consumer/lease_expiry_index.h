// LeaseExpiryIndex: the in-memory index of lease deadlines that drives lease expiry: deadline
// (ms since the epoch) -> (queue, offset range), one entry per queue per Receive and one per
// renewal or FIFO redelivery time.
//
// An entry is a hint, not a fact: when its deadline comes, the leases in its range whose
// invisible_until_ms has passed expire (a renewed lease has a later time and its own entry; an
// acked one is gone), so stale entries cost a lookup and nothing else. Not persisted: on open
// every persisted lease gets an entry again (ConsumerServiceImpl::IndexLiveLeases), so a lease
// never lacks an expiry.
//
// Thread-safety: every method may be called from any thread with any other lock held; the
// index takes only its own mutex and never calls out while holding it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace tokimq::consumer {

struct Progress;

// The leases of `p` in [first, last] whose time has come expire at the entry's deadline.
struct Expiry {
  Progress* p = nullptr;
  int64_t first = 0;
  int64_t last = 0;
};

class LeaseExpiryIndex {
 public:
  // Adds an entry; wakes WaitForEarlier when it is earlier than every other entry.
  void Add(int64_t deadline_ms, const Expiry& e);
  // Removes the earliest entry if its deadline is <= now_ms: true with it in *deadline_ms, *e.
  bool PopDue(int64_t now_ms, int64_t* deadline_ms, Expiry* e);
  // Deadline of the earliest entry, INT64_MAX when none.
  int64_t NextMs() const;
  size_t size() const;

  // Whether stale entries (acked or renewed leases) outnumber the `live` leases by far: more
  // than 4 x (live + 1024) entries and more than twice the size after the last compaction.
  bool OverCompactionBound(int64_t live) const;
  // Compaction, first step: removes every entry (entries added from here on stay) and returns
  // how many there were. The caller then adds an entry per live lease and calls
  // FinishCompaction.
  size_t TakeAll();
  // Compaction, last step: the size now is the base of the next OverCompactionBound.
  void FinishCompaction();

  // Blocks until an entry earlier than `next_ms` is added, Wake() is called while stop()
  // holds, or `timeout` passes. `stop` is evaluated under the index's mutex.
  void WaitForEarlier(int64_t next_ms, std::chrono::milliseconds timeout,
                      const std::function<bool()>& stop);
  // Wakes WaitForEarlier (the caller has made its `stop` true).
  void Wake();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;  // an entry earlier than all others arrived, or Wake()
  std::multimap<int64_t, Expiry> entries_;
  size_t size_after_compaction_ = 0;
};

}  // namespace tokimq::consumer
