#include "consumer/fifo_group_index.h"

namespace tokimq::consumer {

void FifoGroupIndex::Link(int64_t offset, const LeaseRecord& lease) {
  if (lease.parked) ++parked_;
  if (lease.msg_group.empty()) {
    if (lease.parked) ready_.insert(offset);
    return;
  }
  std::set<int64_t>& mine = groups_[lease.msg_group];
  if (!mine.empty() && *mine.begin() < offset) {
    mine.insert(offset);  // behind the group's head: waits
    return;
  }
  if (!mine.empty()) ready_.erase(*mine.begin());  // the old head is no longer the head
  mine.insert(offset);
  if (lease.parked) ready_.insert(offset);
}

void FifoGroupIndex::Unlink(int64_t offset, const LeaseRecord& lease,
                            const std::map<int64_t, LeaseRecord>& leases) {
  if (lease.parked) --parked_;
  ready_.erase(offset);
  if (lease.msg_group.empty()) return;
  auto git = groups_.find(lease.msg_group);
  if (git == groups_.end()) return;
  std::set<int64_t>& mine = git->second;
  const bool was_head = !mine.empty() && *mine.begin() == offset;
  mine.erase(offset);
  if (mine.empty()) {
    groups_.erase(git);
    return;
  }
  if (was_head) {
    const int64_t head = *mine.begin();
    auto lit = leases.find(head);
    if (lit != leases.end() && lit->second.parked) ready_.insert(head);
  }
}

void FifoGroupIndex::Clear() {
  groups_.clear();
  ready_.clear();
  parked_ = 0;
}

void FifoGroupIndex::Rebuild(const std::map<int64_t, LeaseRecord>& leases) {
  Clear();
  for (const auto& [offset, lease] : leases) Link(offset, lease);
}

}  // namespace tokimq::consumer
