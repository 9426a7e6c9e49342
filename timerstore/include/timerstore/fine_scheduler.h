// FineScheduler: the millisecond stage of delivery. Dequeue get walks a wheel slot (one tick
// early) and hands its units here; PopDue releases each one only once clock time >= its own
// deliver time, in deliver-time order (ties by TimerLog position, i.e. enqueue order).
//
// Memory: one entry (~80 bytes) per unit of the ticks currently being delivered; callers bound
// it with size(). Not thread-safe: the TimerStore serialises access. Not durable: recovery
// rebuilds it by walking the slots from the checkpointed read tick again.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "timerstore/timer_log.h"

namespace tokimq {

struct ScheduledUnit {
  int64_t pos = -1;  // TimerLog position
  TimerUnit unit;
  int64_t accounted_tick = 0;  // tick whose completion this unit holds back
};

class FineScheduler {
 public:
  void Add(ScheduledUnit u) { heap_.push(std::move(u)); }
  // Earliest deliver time, or INT64_MAX when empty.
  int64_t NextDueMs() const;
  // Moves every unit with deliver_ms <= now_ms (at most max_count) to `out`, earliest first.
  size_t PopDue(int64_t now_ms, size_t max_count, std::vector<ScheduledUnit>* out);
  // Removes the unit for `phys_offset` if loaded (recall); true if found.
  bool Remove(int64_t phys_offset);
  size_t size() const { return heap_.size(); }

 private:
  struct Later {
    bool operator()(const ScheduledUnit& a, const ScheduledUnit& b) const {
      if (a.unit.deliver_ms != b.unit.deliver_ms) return a.unit.deliver_ms > b.unit.deliver_ms;
      return a.pos > b.pos;
    }
  };
  std::priority_queue<ScheduledUnit, std::vector<ScheduledUnit>, Later> heap_;
};

}  // namespace tokimq
