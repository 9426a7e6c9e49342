// ConsumerServiceImpl::Receive: scanning queues, creating leases, long polling.
#include <charconv>

#include "common/logging.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"
#include "rocksdb/write_batch.h"

namespace tokimq::consumer {
namespace {

std::string Prop(const Message& m, const char* name) {
  auto it = m.properties.find(name);
  return it == m.properties.end() ? std::string() : it->second;
}

int64_t PropInt(const Message& m, const char* name, int64_t fallback) {
  std::string v = Prop(m, name);
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size()) return fallback;
  return out;
}

bool IsSystemSubTopic(const std::string& topic) {
  return topic.rfind(kRetryPrefix, 0) == 0 || topic.rfind(kDlqPrefix, 0) == 0;
}

// Entries per ReadQueue call while scanning.
constexpr int kScanChunk = 64;

}  // namespace

absl::StatusOr<int> ConsumerServiceImpl::QueueCountOf(const std::string& topic) const {
  absl::StatusOr<int> n = queue_count_(topic);
  if (n.ok()) return *n;
  if (absl::IsNotFound(n.status()) && IsSystemSubTopic(topic)) return 1;
  return n.status();
}

uint64_t ConsumerServiceImpl::TopicGen(const std::string& topic) const {
  auto it = topic_gen_.find(topic);
  return it == topic_gen_.end() ? 0 : it->second;
}

absl::Status ConsumerServiceImpl::ScheduleMarker(const QueueKey& key,
                                                 const std::vector<int64_t>& offsets,
                                                 const std::vector<uint32_t>& epochs,
                                                 int64_t deliver_ms) {
  Message marker;
  marker.topic = kLeaseTopic;
  marker.queue_id = 0;
  marker.born_ms = clock_->NowMs();
  marker.properties[kMarkGroup] = key.group;
  marker.properties[kMarkTopic] = key.topic;
  marker.properties[kMarkReadTopic] = key.read_topic;
  marker.properties[kMarkQueueId] = std::to_string(key.queue_id);
  std::string entries;
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (i) entries.push_back(',');
    entries += std::to_string(offsets[i]) + ":" + std::to_string(epochs[i]);
  }
  marker.properties[kMarkEntries] = std::move(entries);
  absl::StatusOr<ScheduleResult> r = timers_->Schedule(std::move(marker), deliver_ms);
  return r.status();
}

absl::Status ConsumerServiceImpl::ReceiveFrom(Progress* p, const ReceiveRequest& req, int want,
                                              std::vector<ReceivedMessage>* out) {
  std::lock_guard<std::mutex> lock(p->mu);
  const QueueKey& k = p->key;
  const int64_t min = store_->MinQueueOffset(k.read_topic, k.queue_id);
  const int64_t max = store_->MaxQueueOffset(k.read_topic, k.queue_id);
  // A group new to this queue starts at the earliest retained message.
  if (p->consume_offset < min) p->consume_offset = min;
  const int64_t from = p->consume_offset;
  if (from >= max) return absl::OkStatus();

  const bool retry_view = k.read_topic != k.topic;
  const GroupPolicy policy = PolicyOf(k.group);
  const int64_t now = clock_->NowMs();
  std::vector<Message> taken;
  bool moved_to_dlq = false;
  int64_t next = from;
  while (static_cast<int>(taken.size()) < want && next < max) {
    TOKIMQ_ASSIGN_OR_RETURN(std::vector<Message> msgs,
                            store_->ReadQueue(k.read_topic, k.queue_id, next, kScanChunk));
    if (msgs.empty()) {
      // Everything in this range was removed by retention.
      next = std::min(next + kScanChunk, max);
      continue;
    }
    for (Message& m : msgs) {
      if (static_cast<int>(taken.size()) >= want) break;
      next = m.queue_offset + 1;
      // The retry topic is shared by every topic of the group: this view takes only its own.
      if (retry_view && Prop(m, prop::kOriginalTopic) != k.topic) continue;
      // Filtered-out messages count as consumed for the group (RocketMQ semantics).
      if (!TagMatches(req.tag_filter, Prop(m, prop::kTag))) continue;
      const int64_t attempt = retry_view ? PropInt(m, prop::kDeliveryAttempt, 2) : 1;
      if (policy.ttl_ms > 0 && now - FirstStoreMs(m) >= policy.ttl_ms) {
        // Waited past the group's TTL before anyone received it: DLQ, not a delivery.
        TOKIMQ_RETURN_IF_ERROR(PutCopy(k, std::move(m),
                                       static_cast<uint32_t>(std::max<int64_t>(attempt - 1, 0)),
                                       true, now));
        moved_to_dlq = true;
        continue;
      }
      taken.push_back(std::move(m));
    }
  }
  if (next == from) return absl::OkStatus();

  const int64_t until = now + req.invisible_ms;
  std::vector<int64_t> offsets;
  std::vector<uint32_t> epochs;
  std::vector<LeaseRecord> leases;
  for (const Message& m : taken) {
    LeaseRecord lease;
    lease.epoch = 1;
    int64_t attempt = retry_view ? PropInt(m, prop::kDeliveryAttempt, 2) : 1;
    lease.attempt = static_cast<uint32_t>(std::clamp<int64_t>(attempt, 1, INT32_MAX));
    lease.invisible_until_ms = until;
    lease.received_ms = now;
    leases.push_back(lease);
    offsets.push_back(m.queue_offset);
    epochs.push_back(lease.epoch);
  }
  // Marker first: a lease persisted without its marker would never expire. (Open also
  // re-schedules markers for every recovered lease.)
  if (!taken.empty()) TOKIMQ_RETURN_IF_ERROR(ScheduleMarker(k, offsets, epochs, until));

  rocksdb::WriteBatch batch;
  std::string pkey = ProgressKey(k);
  batch.Put(pkey, EncodeOffsetValue(pkey, next));
  for (size_t i = 0; i < taken.size(); ++i) {
    std::string lkey = LeaseKey(k, offsets[i]);
    batch.Put(lkey, EncodeLeaseValue(lkey, leases[i]));
  }
  if (taken.empty() && !moved_to_dlq) {
    // Only skipped messages: losing this write just means scanning them again.
    rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch);
    if (!s.ok()) return absl::UnavailableError("group state write failed: " + s.ToString());
  } else {
    TOKIMQ_RETURN_IF_ERROR(WriteSynced(&batch));
  }
  p->consume_offset = next;
  GetGroup(k.group)->in_flight.fetch_add(static_cast<int64_t>(taken.size()));
  for (size_t i = 0; i < taken.size(); ++i) {
    p->leases[offsets[i]] = leases[i];
    ReceivedMessage rm;
    rm.delivery_attempt = static_cast<int>(leases[i].attempt);
    rm.deliver_ms = PropInt(taken[i], prop::kDeliverMs, taken[i].store_ms);
    rm.invisible_until_ms = until;
    rm.receipt_handle = EncodeReceipt(Receipt{k, offsets[i], 1, until}, secret_);
    rm.message = std::move(taken[i]);
    out->push_back(std::move(rm));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReceivedMessage>> ConsumerServiceImpl::Receive(
    const ReceiveRequest& req) {
  if (!ValidGroupName(req.group)) return absl::InvalidArgumentError("invalid group name");
  if (!ValidTopicName(req.topic)) return absl::InvalidArgumentError("invalid topic name");
  if (req.max_messages < 1 || req.max_messages > kMaxReceiveBatch) {
    return absl::InvalidArgumentError("max_messages must be in [1, 1024]");
  }
  if (req.invisible_ms <= 0 || req.invisible_ms > kMaxInvisibleMs) {
    return absl::InvalidArgumentError("invisible duration must be in (0 ms, 12 h]");
  }
  if (req.long_poll_ms < 0 || req.long_poll_ms > kMaxLongPollMs) {
    return absl::InvalidArgumentError("long poll must be in [0, 5 min]");
  }
  TOKIMQ_ASSIGN_OR_RETURN(int queues, QueueCountOf(req.topic));

  GroupState* g = GetGroup(req.group);
  std::vector<Progress*> sources;
  const std::string retry = RetryTopic(req.group);
  // Retries first so that a busy topic cannot starve them.
  if (!IsSystemSubTopic(req.topic)) sources.push_back(GetProgress({req.group, req.topic, retry, 0}));
  uint32_t start = queues > 0 ? g->next_queue.fetch_add(1) % static_cast<uint32_t>(queues) : 0;
  for (int i = 0; i < queues; ++i) {
    int32_t qid = static_cast<int32_t>((start + static_cast<uint32_t>(i)) % queues);
    sources.push_back(GetProgress({req.group, req.topic, req.topic, qid}));
  }

  struct WaiterGuard {
    std::atomic<int>* n;
    ~WaiterGuard() {
      if (n) n->fetch_sub(1);
    }
  } guard{req.long_poll_ms > 0 ? &waiters_ : nullptr};
  if (guard.n) guard.n->fetch_add(1);
  // Long polls are bounded in real time: on a ManualClock the clock may never move.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(req.long_poll_ms);

  std::vector<ReceivedMessage> out;
  while (true) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> l(wait_mu_);
      seen = TopicGen(req.topic) + TopicGen(retry);
    }
    for (Progress* p : sources) {
      int want = req.max_messages - static_cast<int>(out.size());
      if (want <= 0) break;
      absl::Status s = ReceiveFrom(p, req, want, &out);
      if (!s.ok()) {
        if (out.empty()) return s;
        // Leases already taken are returned; the rest waits for the next call.
        TOKIMQ_LOG_WARN("consumer: receive {}/{}: {}", p->key.read_topic, p->key.queue_id,
                        s.ToString());
        return out;
      }
    }
    if (!out.empty() || req.long_poll_ms == 0) return out;
    std::unique_lock<std::mutex> l(wait_mu_);
    bool woke = wait_cv_.wait_until(l, deadline, [&] {
      return stopping_.load() || TopicGen(req.topic) + TopicGen(retry) != seen;
    });
    if (!woke || stopping_.load()) return out;
  }
}

}  // namespace tokimq::consumer
