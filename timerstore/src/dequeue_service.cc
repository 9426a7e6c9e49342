// Dequeue read and put: units due now -> loaded delivered copies -> real topics (or parked).
// Dequeue get (the slot walk) lives in dequeue_walk.cc.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "delivered_copy.h"
#include "poison_copy.h"
#include "timer_store_impl.h"

namespace tokimq {
namespace {

// The timer-topic record `su` was written for: its TIMER_DELIVER_MS is the unit's.
bool IsUnitsRecord(const record::RecordView& rec, const ScheduledUnit& su) {
  std::string_view s;
  int64_t deliver = 0;
  if (rec.topic != kTimerTopic || !rec.FindProperty(prop::kDeliverMs, &s)) return false;
  return ParseInt64(s, &deliver) && deliver == su.unit.deliver_ms;
}

}  // namespace

absl::StatusOr<size_t> TimerStoreImpl::DequeueReadStep() {
  std::vector<ScheduledUnit> due;
  {
    std::lock_guard<std::mutex> l(mu_);
    const int64_t now = clock_->NowMs();
    if (now < retry_at_ms_) return 0;  // backing off after a transient error
    size_t room = kPutQueueCap - std::min(kPutQueueCap, put_queue_.size());
    if (room == 0) return 0;
    fine_.PopDue(now, std::min<size_t>(room, 512), &due);
    // Recalled while loaded: never delivered. Released by the leader this store followed
    // (its copy was copied before the unit came due here: AdoptReplicatedLog): done.
    auto keep = std::remove_if(due.begin(), due.end(), [&](const ScheduledUnit& su) {
      if (recalled_.contains(su.unit.physical_offset)) {
        FinishUnitLocked(su, false);
        return true;
      }
      if (delivered_phys_.empty() || !delivered_phys_.contains(su.unit.physical_offset)) {
        return false;
      }
      FinishUnitLocked(su, (su.unit.flags & kUnitMovedCopy) == 0);
      return true;
    });
    due.erase(keep, due.end());
    MaybeCompleteTicksLocked();
  }
  if (due.empty()) return 0;
  const size_t n = due.size();
  const int64_t now = clock_->NowMs();
  std::vector<ScheduledUnit> dropped, retry;
  absl::Status transient;
  std::vector<LoadedCopy> loaded = LoadCopies(std::move(due), now, &dropped, &retry, &transient);
  std::lock_guard<std::mutex> l(mu_);
  for (const ScheduledUnit& su : dropped) {
    metrics_.dropped.Add(1);
    FinishUnitLocked(su, true);
  }
  DropUncommittedCopiesLocked(&loaded);
  // A read that works says nothing about the puts that failed: only dequeue put resets.
  BackOffLocked(transient, retry, now, /*ok_resets=*/false);
  MaybeCompleteTicksLocked();
  for (LoadedCopy& c : loaded) put_queue_.push_back(std::move(c));
  if (!transient.ok()) return transient;
  return n;
}

std::vector<TimerStoreImpl::LoadedCopy> TimerStoreImpl::LoadCopies(
    std::vector<ScheduledUnit> units, int64_t now, std::vector<ScheduledUnit>* dropped,
    std::vector<ScheduledUnit>* retry, absl::Status* transient) {
  std::vector<LoadedCopy> loaded;
  loaded.reserve(units.size());
  // One batched read: records enqueued close together share a pread. Each delivered copy is
  // built straight from the record view (no decoded timer-topic Message to rewrite), with its
  // properties as record bytes (DeliveredCopy: no map built, PutBatch copies them verbatim).
  std::vector<ReadRequest> reqs;
  reqs.reserve(units.size());
  for (const ScheduledUnit& su : units) reqs.push_back({su.unit.physical_offset, su.unit.msg_size});
  std::vector<std::optional<Message>> copies(units.size());
  std::vector<std::string> poison(units.size());
  std::vector<absl::Status> errors(units.size());
  std::vector<uint64_t> epochs(units.size(), 0);
  std::vector<PhysicalOffset> origins(units.size(), PhysicalOffset::kNone());
  store_->VisitMany(reqs, [&](size_t i, const absl::StatusOr<record::RecordView>& read) {
    if (!read.ok()) {
      errors[i] = read.status();
      return;
    }
    const ScheduledUnit& su = units[i];
    if (su.unit.flags & kUnitMovedCopy) {
      std::string_view v;
      int64_t x = 0;
      if (read->FindProperty(kTimerMoveEpoch, &v) && ParseInt64(v, &x)) {
        epochs[i] = static_cast<uint64_t>(x);
      }
      if (read->FindProperty(kTimerOriginOffset, &v) && ParseInt64(v, &x)) {
        origins[i] = PhysicalOffset(x);
      }
    }
    copies[i] = DeliveredCopy(*read, su, now);
    if (!copies[i]) {
      if (!IsUnitsRecord(*read, su)) {
        // Another record (the unit's was lost with a CommitLog tail and the space reused):
        // nothing of the unit's to park.
        errors[i] = absl::NotFoundError("record mismatch");
        return;
      }
      poison[i] = "not a deliverable timer message (REAL_TOPIC or REAL_QID missing or malformed)";
      copies[i] = PoisonFromRecord(*read, su, now, poison[i]);
    }
  });
  for (size_t i = 0; i < units.size(); ++i) {
    ScheduledUnit& su = units[i];
    if (copies[i]) {
      loaded.push_back(LoadedCopy{std::move(su), std::move(*copies[i]), std::move(poison[i]),
                                  epochs[i], origins[i]});
      continue;
    }
    const absl::Status& e = errors[i];
    if (absl::IsDataLoss(e)) {
      std::string reason = absl::StrCat("the record does not decode: ", e.message());
      Message stub = PoisonStub(su, now, reason);
      loaded.push_back(LoadedCopy{std::move(su), std::move(stub), std::move(reason)});
    } else if (absl::IsNotFound(e) || absl::IsInvalidArgument(e) || absl::IsOutOfRange(e)) {
      if (uint64_t held = 0; drop_log_.Allow(now, &held)) {
        TOKIMQ_LOG_WARN(
            "timerstore: unit at {} points to CommitLog offset {} ({}); dropped ({} similar "
            "lines suppressed)",
            su.pos, su.unit.physical_offset, e.ToString(), held);
      }
      dropped->push_back(su);
    } else {
      if (transient->ok()) *transient = e;
      retry->push_back(su);
    }
  }
  return loaded;
}

void TimerStoreImpl::BackOffLocked(const absl::Status& transient,
                                   const std::vector<ScheduledUnit>& retry, int64_t now,
                                   bool ok_resets) {
  for (const ScheduledUnit& su : retry) AddFineLocked(su);
  if (transient.ok()) {
    if (ok_resets) backoff_ms_ = 0;
    return;
  }
  backoff_ms_ = std::clamp(backoff_ms_ * 2, kMinBackoffMs, kMaxBackoffMs);
  retry_at_ms_ = now + backoff_ms_;
}

void TimerStoreImpl::SplitUndeliverable(std::vector<LoadedCopy>* batch,
                                        std::vector<LoadedCopy>* poison) {
  // A batch usually names a few topics: each is checked once.
  std::vector<std::pair<std::string, absl::Status>> checked;  // copies: copies move below
  size_t kept = 0;
  for (size_t i = 0; i < batch->size(); ++i) {
    LoadedCopy& c = (*batch)[i];
    if (c.poison.empty()) {
      auto it = std::find_if(checked.begin(), checked.end(),
                             [&](const auto& e) { return e.first == c.msg.topic; });
      if (it == checked.end()) {
        absl::Status s = ValidateDestination(c.msg.topic);
        if (s.ok() && options_.check_destination) s = options_.check_destination(c.msg.topic);
        checked.emplace_back(c.msg.topic, std::move(s));
        it = checked.end() - 1;
      }
      if (!it->second.ok()) {
        c.poison = it->second.ToString();
      } else if (c.msg.queue_id < 0) {
        c.poison = absl::StrCat("invalid queue id ", c.msg.queue_id);
      }
    }
    if (!c.poison.empty()) {
      if (c.msg.topic != kPoisonTopic) c.msg = PoisonFromCopy(std::move(c.msg), c.poison);
      poison->push_back(std::move(c));
    } else {
      if (kept != i) (*batch)[kept] = std::move(c);
      ++kept;
    }
  }
  batch->resize(kept);
}

void TimerStoreImpl::PutCopies(std::vector<LoadedCopy> copies,
                               std::vector<ScheduledUnit>* delivered,
                               std::vector<LoadedCopy>* poison, std::vector<ScheduledUnit>* dropped,
                               std::vector<ScheduledUnit>* retry, absl::Status* transient) {
  std::vector<ScheduledUnit> units;
  units.reserve(copies.size());
  std::vector<Message> msgs;
  msgs.reserve(copies.size());
  for (LoadedCopy& c : copies) {
    units.push_back(std::move(c.su));
    msgs.push_back(std::move(c.msg));
  }
  copies.clear();
  absl::Status put = store_->PutBatch(std::move(msgs)).status();
  if (put.ok()) {
    for (ScheduledUnit& su : units) delivered->push_back(std::move(su));
    return;
  }
  if (!absl::IsInvalidArgument(put)) {
    // Nothing reported appended: the units go back to the millisecond stage (reloaded then).
    if (transient->ok()) *transient = put;
    for (ScheduledUnit& su : units) retry->push_back(std::move(su));
    return;
  }
  // One copy of the batch is refused: load them again and put each on its own.
  std::vector<LoadedCopy> again =
      LoadCopies(std::move(units), clock_->NowMs(), dropped, retry, transient);
  SplitUndeliverable(&again, poison);
  for (size_t i = 0; i < again.size(); ++i) {
    LoadedCopy& c = again[i];
    if (!transient->ok()) {  // the store is failing: do not try the rest now
      retry->push_back(std::move(c.su));
      continue;
    }
    absl::Status one = store_->Put(Message(c.msg)).status();
    if (one.ok()) {
      delivered->push_back(std::move(c.su));
    } else if (absl::IsInvalidArgument(one)) {
      c.poison = absl::StrCat("refused by the message store: ", one.ToString());
      c.msg = PoisonFromCopy(std::move(c.msg), c.poison);
      poison->push_back(std::move(c));
    } else {
      *transient = one;
      retry->push_back(std::move(c.su));
    }
  }
}

void TimerStoreImpl::ParkCopies(std::vector<LoadedCopy> poison, std::vector<ScheduledUnit>* parked,
                                std::vector<ScheduledUnit>* dropped,
                                std::vector<ScheduledUnit>* retry, absl::Status* transient) {
  const int64_t now = clock_->NowMs();
  auto log = [&](const LoadedCopy& c, const char* what) {
    uint64_t held = 0;
    if (!poison_log_.Allow(now, &held)) return;
    auto it = c.msg.properties.find(kPoisonTopicProp);
    TOKIMQ_LOG_WARN(
        "timerstore: due message (TIMER_SRC_OFFSET {}, deliver ms {}) for '{}' {} {}: {} ({} "
        "similar lines suppressed)",
        c.su.unit.physical_offset, c.su.unit.deliver_ms,
        it == c.msg.properties.end() ? std::string("?") : QuoteName(it->second), what, kPoisonTopic,
        c.poison, held);
  };
  if (!transient->ok()) {  // the store is failing: park later
    for (LoadedCopy& c : poison) retry->push_back(std::move(c.su));
    return;
  }
  std::vector<Message> msgs;
  msgs.reserve(poison.size());
  for (const LoadedCopy& c : poison) msgs.push_back(c.msg);  // rare path: copies are fine
  absl::Status put = store_->PutBatch(std::move(msgs)).status();
  if (put.ok()) {
    for (LoadedCopy& c : poison) {
      log(c, "parked in");
      parked->push_back(std::move(c.su));
    }
    return;
  }
  for (LoadedCopy& c : poison) {
    if (!absl::IsInvalidArgument(put) || !transient->ok()) {
      if (transient->ok()) *transient = put;
      retry->push_back(std::move(c.su));
      continue;
    }
    absl::Status one = store_->Put(Message(c.msg)).status();
    if (absl::IsInvalidArgument(one)) {
      c.poison = absl::StrCat(c.poison, "; body dropped: ", one.ToString());
      one = store_->Put(WithoutBody(Message(c.msg), one.ToString())).status();
      if (absl::IsInvalidArgument(one)) {
        c.poison = absl::StrCat(c.poison, "; not parked either: ", one.ToString());
        log(c, "dropped, not even parkable in");
        dropped->push_back(std::move(c.su));
        continue;
      }
    }
    if (one.ok()) {
      log(c, "parked in");
      parked->push_back(std::move(c.su));
    } else {
      *transient = one;
      retry->push_back(std::move(c.su));
    }
  }
}

absl::StatusOr<size_t> TimerStoreImpl::DequeuePutStep() {
  std::vector<LoadedCopy> batch;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (clock_->NowMs() < retry_at_ms_) return 0;  // backing off after a transient error
    while (!put_queue_.empty() && batch.size() < 256) {
      batch.push_back(std::move(put_queue_.front()));
      put_queue_.pop_front();
    }
  }
  if (batch.empty()) return 0;
  const size_t n = batch.size();
  // A message that cannot be delivered is parked, never retried: it must not hold up the
  // others (issue 14). Only transient errors (I/O, disk full) retry, with backoff.
  std::vector<LoadedCopy> poison;
  std::vector<ScheduledUnit> delivered, parked, dropped, retry;
  absl::Status transient;
  SplitUndeliverable(&batch, &poison);
  if (!batch.empty()) {
    PutCopies(std::move(batch), &delivered, &poison, &dropped, &retry, &transient);
  }
  if (!poison.empty()) ParkCopies(std::move(poison), &parked, &dropped, &retry, &transient);
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = clock_->NowMs();
  for (const ScheduledUnit& su : delivered) {
    metrics_.delivered.Add(1);
    metrics_.lateness_ms.Record(now - su.unit.deliver_ms);
    FinishUnitLocked(su, true);
  }
  for (const ScheduledUnit& su : parked) {
    metrics_.poison_parked.Add(1);
    FinishUnitLocked(su, true);
  }
  for (const ScheduledUnit& su : dropped) {
    metrics_.dropped.Add(1);
    FinishUnitLocked(su, true);
  }
  BackOffLocked(transient, retry, now, /*ok_resets=*/true);
  MaybeCompleteTicksLocked();
  if (!transient.ok()) return transient;
  return n;
}

}  // namespace tokimq
