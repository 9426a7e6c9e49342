#include "timerstore/fine_scheduler.h"

#include <algorithm>
#include <limits>

namespace tokimq {

void FineScheduler::AddRun(std::vector<ScheduledUnit> run) {
  if (run.empty()) return;
  size_ += run.size();
  runs_.push_back(Run{std::move(run), 0});
}

const ScheduledUnit* FineScheduler::Front(size_t* run) const {
  const ScheduledUnit* best = heap_.empty() ? nullptr : &heap_.top();
  *run = kHeap;
  for (size_t i = 0; i < runs_.size(); ++i) {
    const ScheduledUnit* u = &runs_[i].units[runs_[i].next];
    if (best == nullptr || RunOrder(*u, *best)) {
      best = u;
      *run = i;
    }
  }
  return best;
}

int64_t FineScheduler::NextDueMs() const {
  size_t run;
  const ScheduledUnit* u = Front(&run);
  return u == nullptr ? std::numeric_limits<int64_t>::max() : u->unit.deliver_ms;
}

size_t FineScheduler::PopDue(int64_t now_ms, size_t max_count, std::vector<ScheduledUnit>* out) {
  size_t n = 0;
  while (n < max_count) {
    size_t run;
    const ScheduledUnit* u = Front(&run);
    if (u == nullptr || u->unit.deliver_ms > now_ms) break;
    if (run == kHeap) {
      out->push_back(heap_.top());
      heap_.pop();
    } else {
      Run& r = runs_[run];
      out->push_back(std::move(r.units[r.next++]));
      if (r.next == r.units.size()) runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(run));
    }
    --size_;
    ++n;
  }
  return n;
}

bool FineScheduler::Remove(PhysicalOffset physical_offset) {
  for (auto r = runs_.begin(); r != runs_.end(); ++r) {
    auto it = std::find_if(
        r->units.begin() + static_cast<std::ptrdiff_t>(r->next), r->units.end(),
        [&](const ScheduledUnit& u) { return u.unit.physical_offset == physical_offset; });
    if (it == r->units.end()) continue;
    r->units.erase(it);  // order kept; recalls are rare
    if (r->next == r->units.size()) runs_.erase(r);
    --size_;
    return true;
  }
  std::vector<ScheduledUnit> keep;
  bool found = false;
  while (!heap_.empty()) {
    ScheduledUnit u = heap_.top();
    heap_.pop();
    if (!found && u.unit.physical_offset == physical_offset) {
      found = true;
      continue;
    }
    keep.push_back(std::move(u));
  }
  for (auto& u : keep) heap_.push(std::move(u));
  if (found) --size_;
  return found;
}

}  // namespace tokimq
