// Dequeue services: due wheel slots -> FineScheduler -> loaded copies -> real topics.
#include <algorithm>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "prop_keys.h"
#include "timer_store_impl.h"

namespace tokimq {
namespace {

constexpr int64_t kRecallGraceTicksMs = 10 * 60 * 1000;  // keep recalled ids 10 min past due

bool GetInt(const Message& m, const std::string& key, int64_t* v) {
  auto it = m.properties.find(key);
  if (it == m.properties.end()) return false;
  const std::string& s = it->second;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

absl::StatusOr<size_t> TimerStoreImpl::DequeueGetStep() {
  std::unique_lock<std::mutex> l(mu_);
  if (fine_.size() >= kMaxLoadedUnits) return 0;  // back-pressure
  int64_t now = clock_->NowMs();
  int64_t p = options_.precision_ms;
  size_t progressed = 0;
  // Walk slots one tick before they begin. Empty slots cost one in-memory look-up each, so
  // catching up after a long downtime is fast.
  // Walk a slot once now >= its start - P; after recovery, slots holding units linked past
  // their own tick at once (their units may be due before that).
  const int64_t limit = std::max(TickOf(now) + 2, eager_walk_until_);
  while (next_walk_tick_ < limit) {
    int64_t tick = wheel_->NextLiveTick(next_walk_tick_, limit);
    if (tick != next_walk_tick_) {
      next_walk_tick_ = tick;
      ++progressed;
      continue;
    }
    TimerSlot slot = wheel_->Get(tick);
    InflightLocked(tick);  // records where this tick's puts and roll units begin
    ++next_walk_tick_;
    // Walk the chain outside mu_: units are immutable, and later units for this tick go to
    // the FineScheduler directly from LinkUnitLocked.
    l.unlock();
    std::vector<std::pair<int64_t, TimerUnit>> chain;
    chain.reserve(slot.count);
    int64_t pos = slot.last_pos;
    absl::Status walk_status;
    while (pos >= 0) {
      auto u = timerlog_->Read(pos);
      if (!u.ok()) {
        walk_status = u.status();
        break;
      }
      if (u->slot_tick != tick || u->prev_pos >= pos) {
        walk_status = absl::DataLossError(absl::StrCat("timerlog: broken chain at ", pos));
        break;
      }
      chain.emplace_back(pos, *u);
      pos = u->prev_pos;
    }
    if (!walk_status.ok()) {
      TOKIMQ_LOG_ERROR("timerstore: walking slot of tick {}: {}; remaining units skipped", tick,
                       walk_status.ToString());
    }
    l.lock();
    // Oldest first, so continuations keep enqueue order.
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const auto& [upos, unit] = *it;
      // Linked after its own tick was walked: LinkUnitLocked already handed it over.
      if (handed_early_.erase(upos) > 0) continue;
      ScheduledUnit su{upos, unit, tick};
      if (unit.flags == kUnitRoll) {
        if (recalled_.contains(unit.phys_offset)) {
          InflightLocked(tick).outstanding++;
          FinishUnitLocked(su, /*pending_decrement=*/false);
          continue;
        }
        if (rolled_from_.contains(upos)) continue;  // continuation written before a crash
        TimerUnit next = unit;
        next.ref = upos;
        next.roll_count = unit.roll_count + 1;
        TOKIMQ_RETURN_IF_ERROR(LinkUnitLocked(next).status());
        metrics_.rolled.Add(1);
        continue;
      }
      InflightLocked(tick).outstanding++;
      if (recalled_.contains(unit.phys_offset)) {
        FinishUnitLocked(su, /*pending_decrement=*/false);
      } else if (delivered_phys_.contains(unit.phys_offset)) {
        FinishUnitLocked(su, /*pending_decrement=*/true);  // delivered before the crash
      } else {
        fine_.Add(su);
      }
    }
    ++progressed;
    break;  // one non-empty slot per step keeps the step bounded
  }
  MaybeCompleteTicksLocked();
  int64_t read_tick = ReadTickLocked();
  if (dedup_until_tick_ >= 0 && read_tick > dedup_until_tick_) {
    delivered_phys_.clear();
    rolled_from_.clear();
    dedup_until_tick_ = -1;
  }
  if (progressed > 0 && !recalled_.empty() && recalled_.size() % 1024 == 0) {
    absl::erase_if(recalled_,
                   [&](const auto& kv) { return kv.second + kRecallGraceTicksMs < read_tick * p; });
  }
  return progressed;
}

absl::StatusOr<size_t> TimerStoreImpl::DequeueReadStep() {
  std::vector<ScheduledUnit> due;
  {
    std::lock_guard<std::mutex> l(mu_);
    size_t room = kPutQueueCap - std::min(kPutQueueCap, put_queue_.size());
    if (room == 0) return 0;
    fine_.PopDue(clock_->NowMs(), std::min<size_t>(room, 512), &due);
    // Recalled while loaded: never delivered.
    auto keep = std::remove_if(due.begin(), due.end(), [&](const ScheduledUnit& su) {
      if (!recalled_.contains(su.unit.phys_offset)) return false;
      FinishUnitLocked(su, false);
      return true;
    });
    due.erase(keep, due.end());
    MaybeCompleteTicksLocked();
  }
  if (due.empty()) return 0;
  std::vector<LoadedCopy> loaded;
  loaded.reserve(due.size());
  std::vector<ScheduledUnit> dropped;
  int64_t now = clock_->NowMs();
  // One batched read: records enqueued close together share a pread.
  std::vector<ReadRequest> reqs;
  reqs.reserve(due.size());
  for (const ScheduledUnit& su : due) reqs.push_back({su.unit.phys_offset, su.unit.msg_size});
  std::vector<absl::StatusOr<Message>> reads = store_->ReadMany(reqs);
  for (size_t i = 0; i < due.size(); ++i) {
    ScheduledUnit& su = due[i];
    absl::StatusOr<Message>& read = reads[i];
    int64_t deliver = 0;
    int64_t qid = 0;
    bool ok = read.ok() && read->topic == kTimerTopic &&
              GetInt(*read, timer_keys::DeliverMs(), &deliver) && deliver == su.unit.deliver_ms &&
              read->properties.count(timer_keys::RealTopic()) != 0 &&
              GetInt(*read, timer_keys::RealQueueId(), &qid);
    if (!ok) {
      TOKIMQ_LOG_WARN("timerstore: unit at {} points to CommitLog offset {} ({}); dropped", su.pos,
                      su.unit.phys_offset,
                      read.ok() ? "record mismatch" : read.status().ToString());
      dropped.push_back(su);
      continue;
    }
    Message m = std::move(*read);
    // The two real-destination nodes are reused for two of the timer properties (no
    // allocation for the nodes).
    auto topic_node = m.properties.extract(timer_keys::RealTopic());
    auto qid_node = m.properties.extract(timer_keys::RealQueueId());
    m.topic = std::move(topic_node.mapped());
    m.queue_id = static_cast<int32_t>(qid);
    auto set = [&m](auto& node, const std::string& key, int64_t value) {
      if (node.empty()) {
        m.properties.insert_or_assign(key, std::to_string(value));
        return;
      }
      node.key() = key;
      node.mapped() = std::to_string(value);
      auto r = m.properties.insert(std::move(node));
      if (!r.inserted) r.position->second = std::move(r.node.mapped());
    };
    set(topic_node, timer_keys::EnqueueMs(), su.unit.write_ms);
    set(qid_node, timer_keys::DequeueMs(), now);
    m.properties.insert_or_assign(timer_keys::UnitPos(), std::to_string(su.pos));
    m.properties.insert_or_assign(timer_keys::SourceOffset(), std::to_string(su.unit.phys_offset));
    if (su.unit.roll_count > 0) {
      m.properties.insert_or_assign(timer_keys::RollCount(), std::to_string(su.unit.roll_count));
    }
    m.queue_offset = -1;
    m.physical_offset = -1;
    loaded.push_back(LoadedCopy{std::move(su), std::move(m)});
  }
  std::lock_guard<std::mutex> l(mu_);
  for (const ScheduledUnit& su : dropped) {
    metrics_.dropped.Add(1);
    FinishUnitLocked(su, true);
  }
  MaybeCompleteTicksLocked();
  for (LoadedCopy& c : loaded) put_queue_.push_back(std::move(c));
  return due.size();
}

absl::StatusOr<size_t> TimerStoreImpl::DequeuePutStep() {
  std::vector<LoadedCopy> batch;
  {
    std::lock_guard<std::mutex> l(mu_);
    while (!put_queue_.empty() && batch.size() < 256) {
      batch.push_back(std::move(put_queue_.front()));
      put_queue_.pop_front();
    }
  }
  if (batch.empty()) return 0;
  std::vector<Message> msgs;
  msgs.reserve(batch.size());
  for (LoadedCopy& c : batch) msgs.push_back(std::move(c.msg));
  auto put = store_->PutBatch(std::move(msgs));
  std::lock_guard<std::mutex> l(mu_);
  if (!put.ok()) {
    // Nothing reported appended: back to the millisecond stage for a retry.
    for (LoadedCopy& c : batch) fine_.Add(std::move(c.su));
    return put.status();
  }
  int64_t now = clock_->NowMs();
  for (const LoadedCopy& c : batch) {
    metrics_.delivered.Add(1);
    metrics_.lateness_ms.Record(now - c.su.unit.deliver_ms);
    FinishUnitLocked(c.su, true);
  }
  MaybeCompleteTicksLocked();
  return batch.size();
}

}  // namespace tokimq
