#include "timerstore/fine_scheduler.h"

#include <limits>

namespace tokimq {

int64_t FineScheduler::NextDueMs() const {
  return heap_.empty() ? std::numeric_limits<int64_t>::max() : heap_.top().unit.deliver_ms;
}

size_t FineScheduler::PopDue(int64_t now_ms, size_t max_count, std::vector<ScheduledUnit>* out) {
  size_t n = 0;
  while (n < max_count && !heap_.empty() && heap_.top().unit.deliver_ms <= now_ms) {
    out->push_back(heap_.top());
    heap_.pop();
    ++n;
  }
  return n;
}

bool FineScheduler::Remove(int64_t phys_offset) {
  std::vector<ScheduledUnit> keep;
  bool found = false;
  while (!heap_.empty()) {
    ScheduledUnit u = heap_.top();
    heap_.pop();
    if (!found && u.unit.phys_offset == phys_offset) {
      found = true;
      continue;
    }
    keep.push_back(std::move(u));
  }
  for (auto& u : keep) heap_.push(std::move(u));
  return found;
}

}  // namespace tokimq
