// ConsumerServiceImpl::Receive: scanning queues, creating leases, long polling.
#include <algorithm>
#include <charconv>

#include "absl/container/flat_hash_set.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"
#include "consumer/tag_filter.h"
#include "rocksdb/write_batch.h"

namespace tokimq::consumer {
namespace {

// A view into r's property `name` ("" when absent); valid as long as r's bytes.
std::string_view Prop(const record::RecordView& r, const char* name) {
  std::string_view v;
  return r.FindProperty(name, &v) ? v : std::string_view();
}

int64_t PropInt(const record::RecordView& m, const char* name, int64_t fallback) {
  std::string_view v = Prop(m, name);
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

// Bytes of a receive answer's fields besides the record's own parts: receipt handle, message
// id, ids, offsets and times, and the answer's framing.
constexpr int64_t kAnswerFixedBytes = 1024;

}  // namespace

int64_t ReceiveAnswerBytes(const record::RecordView& v) {
  // The record holds topic, properties and body with 4-byte lengths where the answer has 1-5
  // byte ones; the answer repeats the key and the tag as fields of their own.
  return int64_t{v.size} + static_cast<int64_t>(Prop(v, prop::kKeys).size()) +
         static_cast<int64_t>(Prop(v, prop::kTag).size()) + kAnswerFixedBytes;
}

namespace {

// Whether `v`'s answer could exceed req.max_message_bytes (so it must be set aside). Records
// of at most half the limit never do (key and tag are part of the record): the common case
// costs a comparison.
bool Unanswerable(const ReceiveRequest& req, const record::RecordView& v) {
  if (req.max_message_bytes <= 0) return false;
  if (2 * int64_t{v.size} + kAnswerFixedBytes <= req.max_message_bytes) return false;
  return ReceiveAnswerBytes(v) > req.max_message_bytes;
}

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

int64_t ConsumerServiceImpl::BeginScan(Progress* p, Taken* t) const {
  const QueueKey& k = p->key;
  const int64_t min = store_->MinQueueOffset(k.read_topic, k.queue_id);
  // A group new to this queue starts at the earliest retained message.
  const int64_t from = std::max(p->consume_offset, min);
  t->p = p;
  t->from = from;
  t->next = from;
  return store_->MaxQueueOffset(k.read_topic, k.queue_id);
}

absl::StatusOr<int64_t> ConsumerServiceImpl::ScanQueue(
    const QueueKey& k, int64_t from, int64_t max, const std::function<int()>& room,
    const std::function<bool(const record::RecordView&)>& fits, const RecordVisit& visit) {
  int64_t next = from;
  for (int want = room(); want > 0 && next < max; want = room()) {
    // Records are decoded (and checksummed) as they are read: read no more than are wanted.
    const int chunk = std::min(want, kScanChunk);
    bool full = false;
    TOKIMQ_ASSIGN_OR_RETURN(
        size_t n, store_->VisitQueue(k.read_topic, k.queue_id, next, chunk,
                                     [&](const record::RecordView& v) -> absl::Status {
                                       if (full || room() <= 0 || !fits(v)) {
                                         full = true;  // read, not visited: next call's
                                         return absl::OkStatus();
                                       }
                                       next = v.queue_offset + 1;
                                       return visit(v);
                                     }));
    if (n == 0) {
      // Everything in this range was removed by retention.
      next = std::min(next + chunk, max);
    }
    if (full) break;
  }
  return next;
}

absl::Status ConsumerServiceImpl::SetAsideUnanswerable(const QueueKey& k,
                                                       const record::RecordView& m,
                                                       const ReceiveRequest& req,
                                                       uint32_t attempt, int64_t now) {
  const int64_t bytes = ReceiveAnswerBytes(m);
  if (k.read_topic.rfind(kDlqPrefix, 0) == 0) {
    TOKIMQ_LOG_WARN("consumer: message {}/{}@{} needs a receive answer of {} bytes, over the "
                    "{}-byte frame limit; it cannot be delivered and is skipped for group {}",
                    k.read_topic, k.queue_id, m.queue_offset, bytes, req.max_message_bytes,
                    k.group);
    return absl::OkStatus();
  }
  TOKIMQ_LOG_WARN("consumer: message {}/{}@{} needs a receive answer of {} bytes, over the "
                  "{}-byte frame limit; moved to {} instead of being delivered",
                  k.read_topic, k.queue_id, m.queue_offset, bytes, req.max_message_bytes,
                  DlqTopic(k.group));
  Message copy;
  record::MessageFromView(m, &copy);
  return copies_.Put(k, std::move(copy), attempt, /*to_dlq=*/true, now);
}

ConsumerServiceImpl::TakenMessage ConsumerServiceImpl::Take(const record::RecordView& v,
                                                            bool raw) {
  TakenMessage t;
  t.queue_offset = v.queue_offset;
  t.deliver_ms = PropInt(v, prop::kDeliverMs, v.store_ms);
  if (raw) {
    t.record.assign(v.bytes.data(), v.bytes.size());
  } else {
    record::MessageFromView(v, &t.message);
  }
  return t;
}

absl::Status ConsumerServiceImpl::ReceiveFrom(Progress* p, const ReceiveRequest& req,
                                              const GroupPolicy& policy, int64_t now, int want,
                                              Taken* t) {
  const QueueKey& k = p->key;
  const int64_t max = BeginScan(p, t);
  const int64_t from = t->from;
  if (from >= max) return absl::OkStatus();

  const bool retry_view = k.read_topic != k.topic;
  auto room = [&] { return want - static_cast<int>(t->messages.size()); };
  // A message set aside adds nothing to the answer.
  auto fits = [&](const record::RecordView& v) {
    return t->Fits(ReceiveAnswerBytes(v)) || Unanswerable(req, v);
  };
  TOKIMQ_ASSIGN_OR_RETURN(t->next, ScanQueue(k, from, max, room, fits,
                                             [&](const record::RecordView& m) {
    // The retry topic is shared by every topic of the group: this view takes only its own.
    if (retry_view && Prop(m, prop::kOriginalTopic) != k.topic) return absl::OkStatus();
    // Filtered-out messages count as consumed for the group (RocketMQ semantics).
    if (!TagMatches(req.tag_filter, Prop(m, prop::kTag))) return absl::OkStatus();
    const int64_t attempt = retry_view ? PropInt(m, prop::kDeliveryAttempt, 2) : 1;
    if (Unanswerable(req, m)) {
      return SetAsideUnanswerable(k, m, req,
                                  static_cast<uint32_t>(std::clamp<int64_t>(attempt, 1, INT32_MAX)),
                                  now);
    }
    if (policy.ttl_ms > 0 && now - FirstStoreMs(m) >= policy.ttl_ms) {
      // Waited past the group's TTL before anyone received it: DLQ, not a delivery. A crash
      // before the progress write repeats this move (a duplicate in the DLQ).
      Message copy;
      record::MessageFromView(m, &copy);
      return copies_.Put(k, std::move(copy),
                     static_cast<uint32_t>(std::max<int64_t>(attempt - 1, 0)), true, now);
    }
    LeaseRecord lease;
    lease.epoch = 1;
    lease.attempt = static_cast<uint32_t>(std::clamp<int64_t>(attempt, 1, INT32_MAX));
    lease.invisible_until_ms = now + req.invisible_ms;
    lease.received_ms = now;
    t->leases.push_back(lease);
    t->messages.push_back(Take(m, req.raw_records));
    t->bytes += ReceiveAnswerBytes(m);
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::ReceiveFromFifo(Progress* p, const ReceiveRequest& req,
                                                  const GroupPolicy& policy, int64_t now,
                                                  int want, Taken* t) {
  const QueueKey& k = p->key;
  const int64_t max = BeginScan(p, t);
  const int64_t from = t->from;
  auto take = [&](const record::RecordView& m, LeaseRecord lease) {
    lease.parked = false;
    lease.epoch += 1;
    lease.invisible_until_ms = now + req.invisible_ms;
    lease.received_ms = now;
    t->leases.push_back(lease);
    t->messages.push_back(Take(m, req.raw_records));
    t->bytes += ReceiveAnswerBytes(m);
    return lease;
  };

  // Groups with an unfinished message (leased, or parked waiting for its group or for its
  // redelivery time) block their later messages; p->fifo_index indexes them and its ready() holds the
  // parked entries that head their group. `taken` adds the groups handed out by this call.
  absl::flat_hash_set<std::string> taken;
  size_t parked = p->fifo_index.parked();
  for (int64_t offset : p->fifo_index.ready()) {
    if (static_cast<int>(t->messages.size()) >= want) break;
    const LeaseRecord& lease = p->leases.at(offset);
    if (lease.invisible_until_ms > now) continue;  // redelivery backoff not over
    // A due head: hand it out again (or for the first time, if it was parked behind its group).
    bool found = false;
    bool over_budget = false;
    TOKIMQ_RETURN_IF_ERROR(
        store_
            ->VisitQueue(k.read_topic, k.queue_id, offset, 1,
                         [&](const record::RecordView& m) -> absl::Status {
                           if (m.queue_offset != offset) return absl::OkStatus();
                           found = true;
                           if (Unanswerable(req, m)) {
                             t->dropped.push_back(offset);
                             return SetAsideUnanswerable(k, m, req, std::max(lease.attempt, 1u),
                                                         now);
                           }
                           if (!t->Fits(ReceiveAnswerBytes(m))) {
                             over_budget = true;  // stays parked; the next Receive takes it
                             return absl::OkStatus();
                           }
                           if (lease.epoch == 0 && policy.ttl_ms > 0 &&
                               now - FirstStoreMs(m) >= policy.ttl_ms) {
                             // Waited past the TTL behind its group without a delivery: DLQ
                             // (the group stays blocked for this call; its next message goes
                             // out on the next one).
                             Message copy;
                             record::MessageFromView(m, &copy);
                             t->dropped.push_back(offset);
                             return copies_.Put(k, std::move(copy), 0, true, now);
                           }
                           t->replaced.emplace_back(offset, take(m, lease));
                           return absl::OkStatus();
                         })
            .status());
    if (over_budget) break;
    --parked;
    if (!found) {
      TOKIMQ_LOG_WARN("consumer: parked message {}/{}@{} is gone (retention); dropping it",
                      k.read_topic, k.queue_id, offset);
      t->dropped.push_back(offset);
    }
  }
  auto blocked = [&](const std::string& group) {
    return p->fifo_index.Blocks(group) || taken.contains(group);
  };

  // New messages: a blocked group's message is parked (bounded: kMaxFifoParked), any other is
  // handed out and blocks its group.
  auto room = [&] {
    return parked < kMaxFifoParked ? want - static_cast<int>(t->messages.size()) : 0;
  };
  // A parked (blocked) message adds nothing to the response; only one handed out must fit.
  auto fits = [&](const record::RecordView& v) {
    std::string_view g = Prop(v, prop::kMessageGroup);
    return (!g.empty() && blocked(std::string(g))) || t->Fits(ReceiveAnswerBytes(v)) ||
           Unanswerable(req, v);
  };
  TOKIMQ_ASSIGN_OR_RETURN(t->next, ScanQueue(k, from, max, room, fits,
                                             [&](const record::RecordView& m) {
    const int64_t offset = m.queue_offset;
    if (!TagMatches(req.tag_filter, Prop(m, prop::kTag))) return absl::OkStatus();
    std::string group(Prop(m, prop::kMessageGroup));
    if (!group.empty() && blocked(group)) {
      LeaseRecord waiting;
      waiting.parked = true;
      waiting.epoch = 0;
      waiting.attempt = 1;
      waiting.msg_group = std::move(group);
      t->fresh.emplace_back(offset, std::move(waiting));
      ++parked;
      return absl::OkStatus();
    }
    if (Unanswerable(req, m)) return SetAsideUnanswerable(k, m, req, 1, now);
    if (policy.ttl_ms > 0 && now - FirstStoreMs(m) >= policy.ttl_ms) {
      Message copy;
      record::MessageFromView(m, &copy);
      return copies_.Put(k, std::move(copy), 0, true, now);
    }
    if (!group.empty()) taken.insert(group);
    LeaseRecord lease;
    lease.epoch = 0;  // take() makes it 1
    lease.attempt = 1;
    lease.msg_group = std::move(group);
    t->fresh.emplace_back(offset, take(m, std::move(lease)));
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::ReceiveOnce(const std::vector<Progress*>& all,
                                              const ReceiveRequest& req, bool topic_fifo,
                                              bool wait_for_locks,
                                              bool* skipped, std::vector<ReceivedMessage>* out) {
  // The scan, the write and the in-memory update of one queue happen under its lock, so writes
  // of one queue are never reordered against each other. First pass: only queues no other
  // receiver is working on (try_lock; concurrent receivers spread over the queues instead of
  // queueing behind each other). Blocking pass: every queue, locked in address order (AckBatch
  // uses the same order, so this cannot deadlock).
  std::vector<Progress*> sources;
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(all.size());
  *skipped = false;
  if (wait_for_locks) {
    sources = all;
    std::vector<Progress*> order = all;
    std::sort(order.begin(), order.end());
    for (Progress* p : order) locks.emplace_back(p->mu);
  } else {
    sources.reserve(all.size());
    for (Progress* p : all) {
      std::unique_lock<std::mutex> l(p->mu, std::try_to_lock);
      if (!l.owns_lock()) {
        *skipped = true;
        continue;
      }
      locks.push_back(std::move(l));
      sources.push_back(p);
    }
  }

  const GroupPolicy policy = PolicyOf(req.group);
  const int64_t now = clock_->NowMs();
  const int64_t until = now + req.invisible_ms;
  std::vector<Taken> taken;
  absl::Status scan_error;
  int count = 0;
  int64_t bytes = 0;  // receive answer bytes taken (ReceiveRequest::max_bytes)
  for (Progress* p : sources) {
    const int want = req.max_messages - count;
    if (want <= 0 || (req.max_bytes > 0 && bytes >= req.max_bytes)) break;
    // The topic may have been deleted and re-created with another type since p was made.
    if (p->key.read_topic == p->key.topic) p->SetFifo(topic_fifo);
    Taken t;
    if (req.max_bytes > 0) {
      t.byte_budget = req.max_bytes - bytes;
      t.oversize_first_ok = count == 0;
    }
    absl::Status s = p->fifo ? ReceiveFromFifo(p, req, policy, now, want, &t)
                             : ReceiveFrom(p, req, policy, now, want, &t);
    if (!s.ok()) {
      // What earlier queues gave is still handed out; the rest waits for the next call.
      scan_error = s;
      break;
    }
    // Nothing new in this queue.
    if (t.next == t.from && t.replaced.empty() && t.dropped.empty()) continue;
    count += static_cast<int>(t.messages.size());
    bytes += t.bytes;
    taken.push_back(std::move(t));
  }
  if (count == 0 && !scan_error.ok()) return scan_error;

  // One batch for every queue; WAL without fsync (see the class comment for what a crash does).
  rocksdb::WriteBatch batch;
  for (Taken& t : taken) {
    const QueueKey& k = t.p->key;
    std::string pkey = ProgressKey(k);
    if (t.next != t.from) batch.Put(pkey, EncodeOffsetValue(pkey, t.next));
    std::vector<BlockLease> block;
    if (t.p->fifo) {
      // New entries (leases and parked) in blocks; changed old entries rewrite their blocks.
      for (size_t first = 0; first < t.fresh.size(); first += kMaxBlockLeases) {
        const size_t last = std::min(t.fresh.size(), first + kMaxBlockLeases);
        const int64_t block_id = t.fresh[first].first;
        for (size_t i = first; i < last; ++i) t.fresh[i].second.block = block_id;
        block.assign(t.fresh.begin() + static_cast<std::ptrdiff_t>(first),
                     t.fresh.begin() + static_cast<std::ptrdiff_t>(last));
        std::string bkey = LeaseBlockKey(k, block_id);
        batch.Put(bkey, EncodeLeaseBlockValue(bkey, block));
      }
      if (!t.replaced.empty() || !t.dropped.empty()) {
        StageLeases(t.p, t.dropped, t.replaced, &batch);
      }
      continue;
    }
    // The leases of this queue, in blocks of at most kMaxBlockLeases (one record each).
    for (size_t first = 0; first < t.messages.size(); first += kMaxBlockLeases) {
      const size_t last = std::min(t.messages.size(), first + kMaxBlockLeases);
      const int64_t block_id = t.messages[first].queue_offset;
      block.clear();
      for (size_t i = first; i < last; ++i) {
        t.leases[i].block = block_id;
        block.emplace_back(t.messages[i].queue_offset, t.leases[i]);
      }
      std::string bkey = LeaseBlockKey(k, block_id);
      batch.Put(bkey, EncodeLeaseBlockValue(bkey, block));
    }
  }
  if (batch.Count() > 0) TOKIMQ_RETURN_IF_ERROR(WriteState(&batch));

  out->reserve(out->size() + static_cast<size_t>(count));
  for (Taken& t : taken) {
    Progress* p = t.p;
    p->consume_offset = t.next;
    if (!t.messages.empty()) {
      // One expiry entry per queue covers this call's leases there (FIFO redeliveries of
      // parked entries may lie below the new ones).
      int64_t first = INT64_MAX, last = INT64_MIN;
      for (const TakenMessage& m : t.messages) {
        first = std::min(first, m.queue_offset);
        last = std::max(last, m.queue_offset);
      }
      expiries_.Add(until, Expiry{p, first, last});
    }
    if (p->fifo) {
      for (auto& [offset, lease] : t.replaced) p->SetLease(offset, std::move(lease));
      for (int64_t offset : t.dropped) p->EraseLease(offset);
      for (auto& [offset, lease] : t.fresh) p->SetLease(offset, std::move(lease));
    }
    for (size_t i = 0; i < t.messages.size(); ++i) {
      TakenMessage& m = t.messages[i];
      const int64_t offset = m.queue_offset;
      if (!p->fifo) p->leases.emplace_hint(p->leases.end(), offset, t.leases[i]);
      ReceivedMessage rm;
      rm.delivery_attempt = static_cast<int>(t.leases[i].attempt);
      rm.deliver_ms = m.deliver_ms;
      rm.invisible_until_ms = until;
      rm.receipt_handle =
          EncodeReceipt(Receipt{p->key, offset, t.leases[i].epoch, until}, secret_);
      rm.message = std::move(m.message);
      rm.record = std::move(m.record);
      out->push_back(std::move(rm));
    }
  }
  if (count > 0) GetGroup(req.group)->in_flight.fetch_add(count);
  if (!scan_error.ok()) {
    TOKIMQ_LOG_WARN("consumer: receive {}/{}: {}", req.group, req.topic, scan_error.ToString());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReceivedMessage>> ConsumerServiceImpl::Receive(
    const ReceiveRequest& req) {
  // The name rule (common/names.h). A group it refuses could not have a valid retry topic.
  TOKIMQ_RETURN_IF_ERROR(ValidateGroupName(req.group));
  TOKIMQ_RETURN_IF_ERROR(ValidateDestination(req.topic));
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
  const bool topic_fifo = is_fifo_ && is_fifo_(req.topic);

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
  const auto deadline = RealTimeDeadline(std::chrono::milliseconds(req.long_poll_ms));

  std::vector<ReceivedMessage> out;
  while (true) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> l(wait_mu_);
      seen = TopicGen(req.topic) + TopicGen(retry);
    }
    bool skipped = false;
    TOKIMQ_RETURN_IF_ERROR(ReceiveOnce(sources, req, topic_fifo, false, &skipped, &out));
    if (out.empty() && skipped) {
      // Busy queues were skipped: look at them too before reporting nothing.
      TOKIMQ_RETURN_IF_ERROR(ReceiveOnce(sources, req, topic_fifo, true, &skipped, &out));
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
