// ConsumerServiceImpl: scanning one queue for a Receive (ReceiveFrom, ReceiveFromFifo) and the
// receive answer's size accounting.
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "common/logging.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"
#include "consumer/message_filter.h"

namespace tokimq::consumer {
namespace {

// A view into r's property `name` ("" when absent); valid as long as r's bytes.
std::string_view Prop(const record::RecordView& r, const char* name) {
  std::string_view v;
  return r.FindProperty(name, &v) ? v : std::string_view();
}

int64_t PropInt(const record::RecordView& m, const char* name, int64_t fallback) {
  int64_t out = fallback;
  ParseInt64(Prop(m, name), &out);
  return out;
}

// Entries per ReadQueue call while scanning.
constexpr int kScanChunk = 64;

// Bytes of a receive answer's fields besides the record's own parts: receipt handle, message
// id, ids, offsets and times, and the answer's framing.
constexpr int64_t kAnswerFixedBytes = 1024;

bool Wanted(const ReceiveRequest& req, const record::RecordView& m) {
  return PassesFilters(req.tag_filter, req.sql_filter.get(), m);
}

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

int64_t ConsumerServiceImpl::BeginScan(Progress* p, Taken* t) const {
  const QueueKey& k = p->key;
  const int64_t min = store_->MinQueueOffset(k.read_topic, k.queue_id).value();
  // A group new to this queue starts at the earliest retained message.
  const int64_t from = std::max(p->consume_offset, min);
  t->p = p;
  t->from = from;
  t->next = from;
  return store_->MaxQueueOffset(k.read_topic, k.queue_id).value();
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
        size_t n, store_->VisitQueue(k.read_topic, k.queue_id, QueueOffset(next), chunk,
                                     [&](const record::RecordView& v) -> absl::Status {
                                       if (full || room() <= 0 || !fits(v)) {
                                         full = true;  // read, not visited: next call's
                                         return absl::OkStatus();
                                       }
                                       next = v.queue_offset.value() + 1;
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
  if (k.read_topic.rfind(kDlqTopicPrefix, 0) == 0) {
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
  t.queue_offset = v.queue_offset.value();
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
    if (!Wanted(req, m)) return absl::OkStatus();
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

LeaseRecord ConsumerServiceImpl::TakeFifo(const record::RecordView& m, LeaseRecord lease,
                                          const ReceiveRequest& req, int64_t now, Taken* t) {
  lease.parked = false;
  lease.epoch += 1;
  lease.invisible_until_ms = now + req.invisible_ms;
  lease.received_ms = now;
  t->leases.push_back(lease);
  t->messages.push_back(Take(m, req.raw_records));
  t->bytes += ReceiveAnswerBytes(m);
  return lease;
}

absl::Status ConsumerServiceImpl::RedeliverParked(Progress* p, const ReceiveRequest& req,
                                                  const GroupPolicy& policy, int64_t now,
                                                  int64_t offset, Taken* t, bool* over_budget) {
  const QueueKey& k = p->key;
  const LeaseRecord& lease = p->leases.at(offset);
  bool found = false;
  TOKIMQ_RETURN_IF_ERROR(
      store_
          ->VisitQueue(k.read_topic, k.queue_id, QueueOffset(offset), 1,
                       [&](const record::RecordView& m) -> absl::Status {
                         if (m.queue_offset != QueueOffset(offset)) return absl::OkStatus();
                         found = true;
                         if (Unanswerable(req, m)) {
                           t->dropped.push_back(offset);
                           return SetAsideUnanswerable(k, m, req, std::max(lease.attempt, 1u),
                                                       now);
                         }
                         if (!t->Fits(ReceiveAnswerBytes(m))) {
                           *over_budget = true;  // stays parked; the next Receive takes it
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
                         t->replaced.emplace_back(offset, TakeFifo(m, lease, req, now, t));
                         return absl::OkStatus();
                       })
          .status());
  if (!found && !*over_budget) {
    TOKIMQ_LOG_WARN("consumer: parked message {}/{}@{} is gone (retention); dropping it",
                    k.read_topic, k.queue_id, offset);
    t->dropped.push_back(offset);
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::RedeliverDueHeads(Progress* p, const ReceiveRequest& req,
                                                    const GroupPolicy& policy, int64_t now,
                                                    int want, Taken* t, size_t* parked) {
  auto full = [&] { return static_cast<int>(t->messages.size()) >= want; };
  // ready(): the parked entries that head their group (or have none).
  for (int64_t head : p->fifo_index.ready()) {
    if (full()) break;
    const LeaseRecord& lease = p->leases.at(head);
    if (lease.invisible_until_ms > now) continue;  // redelivery backoff not over
    // A due head: hand it out again (or for the first time, if it was parked behind its
    // group), then (req.max_per_group) the group's next parked entries, in offset order.
    bool over_budget = false;
    TOKIMQ_RETURN_IF_ERROR(RedeliverParked(p, req, policy, now, head, t, &over_budget));
    if (over_budget) break;
    --*parked;
    const std::set<int64_t>* entries =
        lease.msg_group.empty() ? nullptr : p->fifo_index.Entries(lease.msg_group);
    if (entries == nullptr) continue;
    int run = 1;
    for (auto it = entries->upper_bound(head);
         it != entries->end() && run < req.max_per_group && !full(); ++it, ++run) {
      if (!p->leases.at(*it).parked) break;  // never after a parked head; defensive
      TOKIMQ_RETURN_IF_ERROR(RedeliverParked(p, req, policy, now, *it, t, &over_budget));
      if (over_budget) return absl::OkStatus();
      --*parked;
    }
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::ReceiveFromFifo(Progress* p, const ReceiveRequest& req,
                                                  const GroupPolicy& policy, int64_t now,
                                                  int want, Taken* t) {
  const QueueKey& k = p->key;
  const int64_t max = BeginScan(p, t);
  const int64_t from = t->from;

  // Groups with an unfinished message (leased, or parked waiting for its group or for its
  // redelivery time) block their later messages; p->fifo_index indexes them. `taken` adds the
  // groups handed out by this call.
  // (messages handed out per group; a group is blocked once it has req.max_per_group).
  absl::flat_hash_map<std::string, int> taken;
  size_t parked = p->fifo_index.parked();
  TOKIMQ_RETURN_IF_ERROR(RedeliverDueHeads(p, req, policy, now, want, t, &parked));
  auto blocked = [&](const std::string& group) {
    if (p->fifo_index.Blocks(group)) return true;
    auto it = taken.find(group);
    return it != taken.end() && it->second >= req.max_per_group;
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
    const int64_t offset = m.queue_offset.value();
    if (!Wanted(req, m)) return absl::OkStatus();
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
    if (!group.empty()) ++taken[group];
    LeaseRecord lease;
    lease.epoch = 0;  // TakeFifo makes it 1
    lease.attempt = 1;
    lease.msg_group = std::move(group);
    t->fresh.emplace_back(offset, TakeFifo(m, std::move(lease), req, now, t));
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

}  // namespace tokimq::consumer
