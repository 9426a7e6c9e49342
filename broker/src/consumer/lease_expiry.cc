// ConsumerServiceImpl: lease expiry (markers delivered by the TimerStore into kLeaseTopic),
// retry copies and the DLQ.
#include <algorithm>
#include <charconv>

#include "common/logging.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"
#include "rocksdb/write_batch.h"

namespace tokimq::consumer {
namespace {

// Marks retry copies with the store time of the first copy so TTL counts from the original.
constexpr char kFirstStoreMs[] = "FIRST_STORE_MS";
constexpr int kMarkerChunk = 64;

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
  if (to_dlq) {
    copy.topic = DlqTopic(k.group);
    return store_->Put(std::move(copy)).status();
  }
  copy.topic = RetryTopic(k.group);
  return timers_->Schedule(std::move(copy), deliver_ms).status();
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
      if (delay > 0) {
        // Wakes long polls when the redelivery is due (ExpireEntry on a parked entry).
        TOKIMQ_RETURN_IF_ERROR(ScheduleMarker(k.group, k.topic, {EntryOf(k, offset, parked.epoch)},
                                              parked.invisible_until_ms));
      }
      StageLeases(p, {}, {BlockLease{offset, parked}}, batch);
      TOKIMQ_RETURN_IF_ERROR(WriteState(batch));
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

ConsumerServiceImpl::MarkerEntry ConsumerServiceImpl::EntryOf(const QueueKey& k, int64_t offset,
                                                              uint32_t epoch) {
  return MarkerEntry{k.read_topic != k.topic, k.queue_id, offset, epoch};
}

absl::Status ConsumerServiceImpl::ScheduleMarker(const std::string& group,
                                                 const std::string& topic,
                                                 const std::vector<MarkerEntry>& entries,
                                                 int64_t deliver_ms) {
  for (size_t first = 0; first < entries.size(); first += kMaxMarkerEntries) {
    const size_t last = std::min(entries.size(), first + kMaxMarkerEntries);
    Message marker;
    marker.topic = kLeaseTopic;
    marker.queue_id = 0;
    marker.born_ms = clock_->NowMs();
    marker.properties[kMarkGroup] = group;
    marker.properties[kMarkTopic] = topic;
    std::string list;
    list.reserve((last - first) * 16);
    for (size_t i = first; i < last; ++i) {
      const MarkerEntry& e = entries[i];
      if (i != first) list.push_back(',');
      list.push_back(e.retry_view ? 'r' : 't');
      list += std::to_string(e.queue_id);
      list.push_back(':');
      list += std::to_string(e.offset);
      list.push_back(':');
      list += std::to_string(e.epoch);
    }
    marker.properties[kMarkQueueEntries] = std::move(list);
    TOKIMQ_RETURN_IF_ERROR(timers_->Schedule(std::move(marker), deliver_ms).status());
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::ExpireEntry(const QueueKey& k, int64_t offset, int64_t epoch) {
  Progress* p = FindProgress(k);
  if (p == nullptr) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(p->mu);
  auto it = p->leases.find(offset);
  if (it == p->leases.end() || static_cast<int64_t>(it->second.epoch) != epoch) {
    return absl::OkStatus();
  }
  if (it->second.parked && it->second.invisible_until_ms <= clock_->NowMs()) {
    // A parked FIFO entry's redelivery time: nothing expires, receivers may take it now.
    WakeReceivers(k.topic);
    return absl::OkStatus();
  }
  if (it->second.invisible_until_ms > clock_->NowMs()) {
    // Cannot happen with a correct timer store (never early); keep the lease covered.
    return ScheduleMarker(k.group, k.topic, {EntryOf(k, offset, it->second.epoch)},
                          it->second.invisible_until_ms);
  }
  rocksdb::WriteBatch batch;
  return EndLease(p, offset, std::nullopt, &batch);
}

absl::Status ConsumerServiceImpl::HandleMarker(const Message& marker) {
  const std::string* group = FindProp(marker, kMarkGroup);
  const std::string* topic = FindProp(marker, kMarkTopic);
  auto malformed = [&] {
    TOKIMQ_LOG_WARN("consumer: malformed lease marker at {}@{}; skipped", kLeaseTopic,
                    marker.queue_offset);
    return absl::OkStatus();
  };
  if (!group || !topic) return malformed();
  auto split = [](std::string_view* rest) {
    size_t comma = rest->find(',');
    std::string_view entry = rest->substr(0, comma);
    *rest = comma == std::string_view::npos ? std::string_view() : rest->substr(comma + 1);
    return entry;
  };

  if (const std::string* qentries = FindProp(marker, kMarkQueueEntries)) {
    // Version 2: "<t|r><qid>:<offset>:<epoch>,...".
    QueueKey k{*group, *topic, *topic, 0};
    const std::string retry = RetryTopic(*group);
    std::string_view rest = *qentries;
    while (!rest.empty()) {
      std::string_view entry = split(&rest);
      size_t c1 = entry.find(':');
      size_t c2 = c1 == std::string_view::npos ? c1 : entry.find(':', c1 + 1);
      int64_t qid = 0, offset = 0, epoch = 0;
      if (entry.size() < 2 || (entry[0] != 't' && entry[0] != 'r') ||
          c2 == std::string_view::npos || !ParseI64(entry.substr(1, c1 - 1), &qid) ||
          qid < 0 || qid > INT32_MAX || !ParseI64(entry.substr(c1 + 1, c2 - c1 - 1), &offset) ||
          !ParseI64(entry.substr(c2 + 1), &epoch)) {
        malformed().IgnoreError();
        continue;
      }
      k.read_topic = entry[0] == 'r' ? retry : *topic;
      k.queue_id = static_cast<int32_t>(qid);
      TOKIMQ_RETURN_IF_ERROR(ExpireEntry(k, offset, epoch));
    }
    return absl::OkStatus();
  }

  // Version 1 (one queue per marker), still accepted from data written by older brokers.
  const std::string* read = FindProp(marker, kMarkReadTopic);
  const std::string* qid_s = FindProp(marker, kMarkQueueId);
  const std::string* entries = FindProp(marker, kMarkEntries);
  int64_t qid = 0;
  if (!read || !qid_s || !entries || !ParseI64(*qid_s, &qid) || qid < 0 || qid > INT32_MAX) {
    return malformed();
  }
  const QueueKey k{*group, *topic, *read, static_cast<int32_t>(qid)};
  std::string_view rest = *entries;
  while (!rest.empty()) {
    std::string_view entry = split(&rest);
    size_t colon = entry.find(':');
    int64_t offset = 0, epoch = 0;
    if (colon == std::string_view::npos || !ParseI64(entry.substr(0, colon), &offset) ||
        !ParseI64(entry.substr(colon + 1), &epoch)) {
      continue;
    }
    TOKIMQ_RETURN_IF_ERROR(ExpireEntry(k, offset, epoch));
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::RunUntilIdle() {
  std::lock_guard<std::mutex> lock(lease_mu_);
  while (true) {
    const int64_t min = store_->MinQueueOffset(kLeaseTopic, 0);
    const int64_t max = store_->MaxQueueOffset(kLeaseTopic, 0);
    if (lease_topic_offset_ < min) {
      TOKIMQ_LOG_WARN("consumer: lease markers {}..{} were removed before processing",
                      lease_topic_offset_, min);
      lease_topic_offset_ = min;
    }
    if (lease_topic_offset_ >= max) return absl::OkStatus();
    TOKIMQ_ASSIGN_OR_RETURN(std::vector<Message> markers,
                            store_->ReadQueue(kLeaseTopic, 0, lease_topic_offset_, kMarkerChunk));
    int64_t next = markers.empty() ? std::min(lease_topic_offset_ + kMarkerChunk, max)
                                   : lease_topic_offset_;
    for (const Message& m : markers) {
      TOKIMQ_RETURN_IF_ERROR(HandleMarker(m));
      next = m.queue_offset + 1;
      lease_topic_offset_ = next;
    }
    lease_topic_offset_ = next;
    // Not synced: reprocessing a marker after a crash is harmless (its leases are gone).
    rocksdb::WriteBatch batch;
    batch.Put(kLeaseTopicOffsetKey, EncodeOffsetValue(kLeaseTopicOffsetKey, next));
    rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch);
    if (!s.ok()) return absl::UnavailableError("group state write failed: " + s.ToString());
  }
}

}  // namespace tokimq::consumer
