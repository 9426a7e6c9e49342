// ConsumerServiceImpl::Receive: locking the queues of a receive, one group-state write for what
// their scans took (receive_scan.cc), the leases and their expiry entries, long polling.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"
#include "rocksdb/write_batch.h"

namespace tokimq::consumer {
namespace {

bool IsSystemSubTopic(const std::string& topic) {
  return topic.rfind(kRetryTopicPrefix, 0) == 0 || topic.rfind(kDlqTopicPrefix, 0) == 0;
}

}  // namespace

absl::StatusOr<int> ConsumerServiceImpl::QueueCountOf(const std::string& topic) const {
  absl::StatusOr<int> n = queue_count_(topic);
  if (n.ok()) return *n;
  if (absl::IsNotFound(n.status()) && IsSystemSubTopic(topic)) return 1;
  return n.status();
}

void ConsumerServiceImpl::LockSources(const std::vector<Progress*>& all, bool wait_for_locks,
                                      std::vector<Progress*>* sources,
                                      std::vector<std::unique_lock<std::mutex>>* locks,
                                      bool* skipped) {
  // First pass: only queues no other receiver is working on (try_lock; concurrent receivers
  // spread over the queues instead of queueing behind each other). Blocking pass: every queue,
  // locked in address order (AckBatch uses the same order, so this cannot deadlock).
  locks->reserve(all.size());
  *skipped = false;
  if (wait_for_locks) {
    *sources = all;
    std::vector<Progress*> order = all;
    std::sort(order.begin(), order.end());
    for (Progress* p : order) locks->emplace_back(p->mu);
    return;
  }
  sources->reserve(all.size());
  for (Progress* p : all) {
    std::unique_lock<std::mutex> l(p->mu, std::try_to_lock);
    if (!l.owns_lock()) {
      *skipped = true;
      continue;
    }
    locks->push_back(std::move(l));
    sources->push_back(p);
  }
}

absl::Status ConsumerServiceImpl::ScanSources(const std::vector<Progress*>& sources,
                                              const ReceiveRequest& req, bool topic_fifo,
                                              int64_t now, std::vector<Taken>* taken,
                                              int* count) {
  const GroupPolicy policy = PolicyOf(req.group);
  int64_t bytes = 0;  // receive answer bytes taken (ReceiveRequest::max_bytes)
  for (Progress* p : sources) {
    const int want = req.max_messages - *count;
    if (want <= 0 || (req.max_bytes > 0 && bytes >= req.max_bytes)) break;
    // The topic may have been deleted and re-created with another type since p was made.
    if (p->key.read_topic == p->key.topic) p->SetFifo(topic_fifo);
    Taken t;
    if (req.max_bytes > 0) {
      t.byte_budget = req.max_bytes - bytes;
      t.oversize_first_ok = *count == 0;
    }
    absl::Status s = p->fifo ? ReceiveFromFifo(p, req, policy, now, want, &t)
                             : ReceiveFrom(p, req, policy, now, want, &t);
    // What earlier queues gave is still handed out; the rest waits for the next call.
    if (!s.ok()) return s;
    // Nothing new in this queue.
    if (t.next == t.from && t.replaced.empty() && t.dropped.empty()) continue;
    *count += static_cast<int>(t.messages.size());
    bytes += t.bytes;
    taken->push_back(std::move(t));
  }
  return absl::OkStatus();
}

void ConsumerServiceImpl::StageTaken(std::vector<Taken>* taken, rocksdb::WriteBatch* batch) {
  std::vector<BlockLease> block;
  for (Taken& t : *taken) {
    const QueueKey& k = t.p->key;
    std::string pkey = ProgressKey(k);
    if (t.next != t.from) batch->Put(pkey, EncodeOffsetValue(pkey, t.next));
    if (t.p->fifo) {
      // New entries (leases and parked) in blocks; changed old entries rewrite their blocks.
      for (size_t first = 0; first < t.fresh.size(); first += kMaxBlockLeases) {
        const size_t last = std::min(t.fresh.size(), first + kMaxBlockLeases);
        const int64_t block_id = t.fresh[first].first;
        for (size_t i = first; i < last; ++i) t.fresh[i].second.block = block_id;
        block.assign(t.fresh.begin() + static_cast<std::ptrdiff_t>(first),
                     t.fresh.begin() + static_cast<std::ptrdiff_t>(last));
        std::string bkey = LeaseBlockKey(k, block_id);
        batch->Put(bkey, EncodeLeaseBlockValue(bkey, block));
      }
      if (!t.replaced.empty() || !t.dropped.empty()) {
        StageLeases(t.p, t.dropped, t.replaced, batch);
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
      batch->Put(bkey, EncodeLeaseBlockValue(bkey, block));
    }
  }
}

void ConsumerServiceImpl::ApplyTaken(std::vector<Taken>* taken, int64_t until,
                                     std::vector<ReceivedMessage>* out) {
  for (Taken& t : *taken) {
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
    p->received += static_cast<int64_t>(t.messages.size());
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
}

absl::Status ConsumerServiceImpl::ReceiveOnce(const std::vector<Progress*>& all,
                                              const ReceiveRequest& req, bool topic_fifo,
                                              bool wait_for_locks,
                                              bool* skipped, std::vector<ReceivedMessage>* out) {
  // The scan, the write and the in-memory update of one queue happen under its lock, so writes
  // of one queue are never reordered against each other.
  std::vector<Progress*> sources;
  std::vector<std::unique_lock<std::mutex>> locks;
  LockSources(all, wait_for_locks, &sources, &locks, skipped);

  const int64_t now = clock_->NowMs();
  const int64_t until = now + req.invisible_ms;
  std::vector<Taken> taken;
  int count = 0;
  const absl::Status scan_error = ScanSources(sources, req, topic_fifo, now, &taken, &count);
  if (count == 0 && !scan_error.ok()) return scan_error;

  // One batch for every queue; WAL without fsync (see the class comment for what a crash does).
  rocksdb::WriteBatch batch;
  StageTaken(&taken, &batch);
  if (batch.Count() > 0) TOKIMQ_RETURN_IF_ERROR(WriteState(&batch));

  out->reserve(out->size() + static_cast<size_t>(count));
  ApplyTaken(&taken, until, out);
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
    return absl::InvalidArgumentError(
        absl::StrCat("max_messages must be in [1, ", kMaxReceiveBatch, "]"));
  }
  if (req.max_per_group < 1 || req.max_per_group > kMaxReceiveBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_per_group must be in [1, ", kMaxReceiveBatch, "]"));
  }
  if (req.invisible_ms <= 0 || req.invisible_ms > kMaxInvisibleMs) {
    return absl::InvalidArgumentError("invisible duration must be in (0 ms, 12 h]");
  }
  if (req.long_poll_ms < 0 || req.long_poll_ms > kMaxLongPollMs) {
    return absl::InvalidArgumentError("long poll must be in [0, 5 min]");
  }
  TOKIMQ_ASSIGN_OR_RETURN(int queues, QueueCountOf(req.topic));
  // Message-group order is for Orderly groups only (RocketMQ 5: consumeMessageOrderly).
  const bool topic_fifo =
      is_fifo_ && is_fifo_(req.topic) && ConsumesInOrder(req.group, req.orderly_by_default);

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
  // On the service's Clock; LongPollWake also ends a wait after its length of real time, as a
  // ManualClock may never move.
  const int64_t deadline_us = clock_->NowMicros() + req.long_poll_ms * 1000;

  std::vector<ReceivedMessage> out;
  while (true) {
    const LongPollWake::Seen seen = wake_.Observe(req.topic, retry);
    bool skipped = false;
    TOKIMQ_RETURN_IF_ERROR(ReceiveOnce(sources, req, topic_fifo, false, &skipped, &out));
    if (out.empty() && skipped) {
      // Busy queues were skipped: look at them too before reporting nothing.
      TOKIMQ_RETURN_IF_ERROR(ReceiveOnce(sources, req, topic_fifo, true, &skipped, &out));
    }
    if (!out.empty() || req.long_poll_ms == 0) return out;
    if (stopping_.load()) return out;
    if (!wake_.WaitAfter(seen, req.topic, retry, *clock_, deadline_us, stopping_) ||
        stopping_.load()) {
      return out;
    }
  }
}

}  // namespace tokimq::consumer
