// FifoGroupIndex: the message-group index of one FIFO queue's lease table (docs/ordering.md
// "FIFO topics"), so a Receive need not walk every parked entry.
//
// Over the queue's entries (queue offset -> LeaseRecord: live leases and parked entries) it
// keeps: per message group, the offsets of its entries (the lowest is the group's head, and a
// group with any entry blocks its later messages); the parked entries that head their group
// or have none (`ready`: redeliverable once their invisible_until_ms comes); and the number of
// parked entries.
//
// Owned by one queue's Progress and guarded by its mutex; not thread-safe on its own. Memory
// only: rebuilt from the lease table (Rebuild) when the group state is loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "consumer/group_state.h"

namespace tokimq::consumer {

class FifoGroupIndex {
 public:
  // Entry `offset` with `lease` was added to the table.
  void Link(int64_t offset, const LeaseRecord& lease);
  // Entry `offset` with `lease` is being removed from `leases` (still in it or already gone);
  // when it headed its group, the next entry of the group becomes the head (and ready if it
  // is parked).
  void Unlink(int64_t offset, const LeaseRecord& lease,
              const std::map<int64_t, LeaseRecord>& leases);
  // Forgets everything.
  void Clear();
  // Clear, then Link every entry of `leases`.
  void Rebuild(const std::map<int64_t, LeaseRecord>& leases);

  // Whether `group` has an unfinished entry (leased, or parked), i.e. blocks its later messages.
  bool Blocks(const std::string& group) const { return groups_.contains(group); }
  // The entries of `group` in offset order (the first is its head); nullptr when it has none.
  const std::set<int64_t>* Entries(const std::string& group) const {
    auto it = groups_.find(group);
    return it == groups_.end() ? nullptr : &it->second;
  }
  // Parked entries heading their group (or ungrouped), in offset order.
  const std::set<int64_t>& ready() const { return ready_; }
  // Parked entries (ready or waiting behind their group).
  size_t parked() const { return parked_; }

 private:
  absl::flat_hash_map<std::string, std::set<int64_t>> groups_;
  std::set<int64_t> ready_;
  size_t parked_ = 0;
};

}  // namespace tokimq::consumer
