// ConsumerServiceImpl: lease expiry (the in-memory expiry index), retry copies and the DLQ.
#include <algorithm>
#include <charconv>

#include "common/logging.h"
#include "common/names.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"
#include "rocksdb/write_batch.h"

namespace tokimq::consumer {
namespace {

// Marks retry copies with the store time of the first copy so TTL counts from the original.
constexpr char kFirstStoreMs[] = "FIRST_STORE_MS";

bool ParseI64(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

const std::string* FindProp(const Message& m, const char* name) {
  auto it = m.properties.find(name);
  return it == m.properties.end() ? nullptr : &it->second;
}

}  // namespace

int64_t ConsumerServiceImpl::FirstStoreMs(const Message& m) {
  int64_t first_store = m.store_ms;
  if (const std::string* v = FindProp(m, kFirstStoreMs)) ParseI64(*v, &first_store);
  return first_store;
}

int64_t ConsumerServiceImpl::FirstStoreMs(const record::RecordView& v) {
  int64_t first_store = v.store_ms;
  std::string_view s;
  if (v.FindProperty(kFirstStoreMs, &s)) ParseI64(s, &first_store);
  return first_store;
}

absl::Status ConsumerServiceImpl::PutCopy(const QueueKey& k, Message copy, uint32_t attempt,
                                          bool to_dlq, int64_t deliver_ms) {
  const int64_t first_store = FirstStoreMs(copy);
  // Timer bookkeeping of the previous trip must not leak into the next one.
  for (const char* name : {prop::kRealTopic, prop::kRealQueueId, prop::kDeliverMs,
                           prop::kTimerEnqueueMs, prop::kTimerDequeueMs, prop::kTimerUnitPos,
                           prop::kTimerRollCount}) {
    copy.properties.erase(name);
  }
  copy.properties[kFirstStoreMs] = std::to_string(first_store);
  copy.properties[prop::kOriginalTopic] = k.topic;
  copy.properties[prop::kDeliveryAttempt] = std::to_string(attempt);
  copy.queue_id = 0;
  copy.queue_offset = -1;
  copy.physical_offset = -1;
  copy.store_ms = 0;
  copy.topic = to_dlq ? DlqTopic(k.group) : RetryTopic(k.group);
  // A copy that can never be stored (a group named before the name rule has no valid retry or
  // DLQ topic; a copy the store refuses) is parked instead, so the lease ends and nothing
  // retries it forever (issue 14). Transient errors are returned: the lease stays, expiry
  // tries again.
  absl::Status s = ValidateDestination(copy.topic);
  if (s.ok()) {
    Message keep = copy;  // only a refusal needs it again
    s = to_dlq ? store_->Put(std::move(copy)).status()
               : timers_->Schedule(std::move(copy), deliver_ms).status();
    if (!absl::IsInvalidArgument(s)) return s;
    copy = std::move(keep);
  }
  return ParkCopy(std::move(copy), to_dlq ? "dlq" : "retry", s);
}

absl::Status ConsumerServiceImpl::ParkCopy(Message copy, const char* source,
                                           const absl::Status& why) {
  const std::string destination = copy.topic;
  copy.properties[kPoisonReason] = why.ToString();
  copy.properties[kPoisonTopicProp] = destination;
  copy.properties[kPoisonQueueId] = "0";
  copy.properties[kPoisonSource] = source;
  copy.topic = kPoisonTopic;
  Message keep = copy;
  absl::Status s = store_->Put(std::move(copy)).status();
  if (absl::IsInvalidArgument(s)) {  // too large with the poison properties: park it bodiless
    keep.body.clear();
    keep.properties[kPoisonReason] += "; body dropped: " + s.ToString();
    s = store_->Put(std::move(keep)).status();
  }
  const bool dropped = absl::IsInvalidArgument(s);
  if (!s.ok() && !dropped) return s;  // transient: the lease stays and is tried again
  uint64_t held = 0;
  if (poison_log_.Allow(clock_->NowMs(), &held)) {
    TOKIMQ_LOG_WARN("consumer: {} copy for '{}' {} {}: {} ({} similar lines suppressed)", source,
                    QuoteName(destination), dropped ? "dropped, not even parkable in" : "parked in",
                    kPoisonTopic, why.ToString(), held);
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::EndLease(Progress* p, int64_t offset,
                                           std::optional<int64_t> delay_ms,
                                           rocksdb::WriteBatch* batch) {
  const QueueKey& k = p->key;
  const LeaseRecord lease = p->leases.at(offset);
  const GroupPolicy policy = PolicyOf(k.group);
  const int64_t now = clock_->NowMs();

  TOKIMQ_ASSIGN_OR_RETURN(std::vector<Message> msgs,
                          store_->ReadQueue(k.read_topic, k.queue_id, offset, 1));
  if (msgs.empty() || msgs[0].queue_offset != offset) {
    TOKIMQ_LOG_WARN("consumer: leased message {}/{}@{} is gone (retention); dropping lease",
                    k.read_topic, k.queue_id, offset);
  } else {
    const int64_t first_store = FirstStoreMs(msgs[0]);
    const bool too_old = policy.ttl_ms > 0 && now - first_store >= policy.ttl_ms;
    const bool exhausted = static_cast<int64_t>(lease.attempt) >= policy.max_attempts;
    if (too_old || exhausted) {
      TOKIMQ_RETURN_IF_ERROR(PutCopy(k, std::move(msgs[0]), lease.attempt, true, now));
    } else if (p->fifo) {
      // FIFO: the retry stays in place (a copy in the retry topic would let the group's later
      // messages overtake it). The entry is parked until the backoff ends and keeps its group
      // blocked; the epoch moves on so the old receipt handle is stale.
      LeaseRecord parked = lease;
      parked.parked = true;
      parked.epoch += 1;
      parked.attempt += 1;
      const int64_t delay =
          delay_ms ? *delay_ms : BackoffMs(policy, static_cast<int>(lease.attempt));
      parked.invisible_until_ms = now + delay;
      StageLeases(p, {}, {BlockLease{offset, parked}}, batch);
      TOKIMQ_RETURN_IF_ERROR(WriteState(batch));
      // Wakes long polls when the redelivery is due (ExpireRange on a parked entry).
      if (delay > 0) ScheduleExpiry(parked.invisible_until_ms, p, offset, offset);
      p->SetLease(offset, std::move(parked));
      GetGroup(k.group)->in_flight.fetch_sub(1);
      if (delay == 0) WakeReceivers(k.topic);
      return absl::OkStatus();
    } else {
      int64_t delay = delay_ms ? *delay_ms : BackoffMs(policy, static_cast<int>(lease.attempt));
      TOKIMQ_RETURN_IF_ERROR(
          PutCopy(k, std::move(msgs[0]), lease.attempt + 1, false, now + delay));
    }
  }
  // A crash here (copy written, lease not yet deleted) redelivers the message twice: see
  // docs/operations.md "Delivery guarantees".
  StageLeases(p, {offset}, {}, batch);
  TOKIMQ_RETURN_IF_ERROR(WriteState(batch));
  p->EraseLease(offset);
  GetGroup(k.group)->in_flight.fetch_sub(1);
  // FIFO: the group's head went to the DLQ (or is gone): its next message may go out.
  if (p->fifo) WakeReceivers(k.topic);
  return absl::OkStatus();
}

void ConsumerServiceImpl::ScheduleExpiry(int64_t deadline_ms, Progress* p, int64_t first,
                                         int64_t last) {
  std::lock_guard<std::mutex> l(expiry_mu_);
  const bool earliest = expiries_.empty() || deadline_ms < expiries_.begin()->first;
  expiries_.emplace(deadline_ms, Expiry{p, first, last});
  if (earliest) expiry_cv_.notify_one();
}

int64_t ConsumerServiceImpl::NextExpiryMs() {
  std::lock_guard<std::mutex> l(expiry_mu_);
  return expiries_.empty() ? INT64_MAX : expiries_.begin()->first;
}

absl::Status ConsumerServiceImpl::ExpireRange(const Expiry& e) {
  Progress* p = e.p;
  std::lock_guard<std::mutex> lock(p->mu);
  const int64_t now = clock_->NowMs();
  std::vector<int64_t> due;
  bool wake = false;
  for (auto it = p->leases.lower_bound(e.first); it != p->leases.end() && it->first <= e.last;
       ++it) {
    const LeaseRecord& lease = it->second;
    if (lease.invisible_until_ms > now) continue;  // renewed (its own entry), or not yet
    if (lease.parked) {
      // A parked FIFO entry's redelivery time: nothing expires, receivers may take it now.
      // (Entries parked behind their group have time 0 and need no wake-up, but one is harmless.)
      wake = wake || lease.invisible_until_ms > 0;
      continue;
    }
    due.push_back(it->first);
  }
  if (wake) WakeReceivers(p->key.topic);
  for (int64_t offset : due) {
    rocksdb::WriteBatch batch;
    TOKIMQ_RETURN_IF_ERROR(EndLease(p, offset, std::nullopt, &batch));
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::RunUntilIdle() {
  absl::Status s = RunDueExpiries();
  MaybeCompactExpiries();
  return s;
}

int64_t ConsumerServiceImpl::ExpiryIndexEntries() const {
  std::lock_guard<std::mutex> l(expiry_mu_);
  return static_cast<int64_t>(expiries_.size());
}

absl::Status ConsumerServiceImpl::RunDueExpiries() {
  std::lock_guard<std::mutex> lock(lease_mu_);
  while (true) {
    Expiry e;
    int64_t deadline;
    {
      std::lock_guard<std::mutex> l(expiry_mu_);
      if (expiries_.empty() || expiries_.begin()->first > clock_->NowMs()) {
        return absl::OkStatus();
      }
      deadline = expiries_.begin()->first;
      e = expiries_.begin()->second;
      expiries_.erase(expiries_.begin());
    }
    absl::Status s = ExpireRange(e);
    if (!s.ok()) {
      // Keep the entry: the leases not yet expired are tried again.
      std::lock_guard<std::mutex> l(expiry_mu_);
      expiries_.emplace(deadline, e);
      return s;
    }
  }
}

}  // namespace tokimq::consumer
