// FineScheduler: the millisecond stage of delivery. Dequeue get walks a wheel slot (one tick
// early) and hands its units here; PopDue releases each one only once clock time >= its own
// deliver time, in deliver-time order (ties by TimerLog position, i.e. enqueue order).
//
// Units come one at a time (Add: a heap) or as a whole walked slot at once (AddRun: a run the
// caller sorted, kept as it is): loading a busy slot (100k+ units) into the heap took 6-25 ms
// under the TimerStore's lock once per tick, which held up the releases due meanwhile.
//
// Memory: one entry (~80 bytes) per unit of the ticks currently being delivered; callers bound
// it with size(). Not thread-safe: the TimerStore serialises access. Not durable: recovery
// rebuilds it by walking the slots from the checkpointed read tick again.
#pragma once

#include <cstdint>
#include <deque>
#include <queue>
#include <vector>

#include "timerstore/timer_log.h"

namespace tokimq {

struct ScheduledUnit {
  TimerLogPosition pos = TimerLogPosition::kNone();
  TimerUnit unit;
  int64_t accounted_tick = 0;  // tick whose completion this unit holds back
};

class FineScheduler {
 public:
  void Add(ScheduledUnit u) {
    heap_.push(std::move(u));
    ++size_;
  }
  // Adds `run`, which must be sorted earliest first (deliver_ms, then pos: RunOrder). O(1)
  // besides the move; PopDue merges it with the rest.
  void AddRun(std::vector<ScheduledUnit> run);
  // The order PopDue releases in: deliver_ms, then TimerLog position.
  static bool RunOrder(const ScheduledUnit& a, const ScheduledUnit& b) {
    if (a.unit.deliver_ms != b.unit.deliver_ms) return a.unit.deliver_ms < b.unit.deliver_ms;
    return a.pos < b.pos;
  }
  // Earliest deliver time, or INT64_MAX when empty.
  int64_t NextDueMs() const;
  // Moves every unit with deliver_ms <= now_ms (at most max_count) to `out`, earliest first.
  size_t PopDue(int64_t now_ms, size_t max_count, std::vector<ScheduledUnit>* out);
  // Removes the unit for `physical_offset` if loaded (recall); true if found.
  bool Remove(PhysicalOffset physical_offset);
  size_t size() const { return size_; }

 private:
  struct Later {
    bool operator()(const ScheduledUnit& a, const ScheduledUnit& b) const {
      return RunOrder(b, a);
    }
  };
  struct Run {
    std::vector<ScheduledUnit> units;
    size_t next = 0;  // units[next..] not popped yet
  };
  static constexpr size_t kHeap = SIZE_MAX;
  // The earliest unit, or nullptr when empty; *run is the index in runs_ holding it, or kHeap.
  const ScheduledUnit* Front(size_t* run) const;
  std::priority_queue<ScheduledUnit, std::vector<ScheduledUnit>, Later> heap_;
  std::deque<Run> runs_;  // never empty ones
  size_t size_ = 0;
};

}  // namespace tokimq
