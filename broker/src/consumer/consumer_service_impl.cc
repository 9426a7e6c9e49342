// ConsumerServiceImpl: construction, group-state writes, ack / renew / nack, policy, gauges and
// threads. Receive lives in receive.cc, lease expiry in lease_expiry.cc, recovery in
// consumer_state_recovery.cc.
#include "consumer/consumer_service_impl.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "common/logging.h"
#include "common/names.h"
#include "common/status.h"
#include "rocksdb/write_batch.h"

namespace tokimq {

absl::StatusOr<std::unique_ptr<ConsumerService>> NewConsumerService(ConsumerServiceDeps deps) {
  return consumer::ConsumerServiceImpl::Create(std::move(deps));
}

namespace consumer {

ConsumerServiceImpl::ConsumerServiceImpl(ConsumerServiceDeps deps)
    : clock_(deps.clock),
      store_(deps.store),
      timers_(deps.timers),
      db_(deps.db),
      queue_count_(std::move(deps.queue_count)),
      is_fifo_(std::move(deps.is_fifo)),
      group_orderly_(std::move(deps.group_orderly)),
      admit_state_write_(std::move(deps.admit_state_write)),
      wal_sync_clock_(deps.wal_sync_clock) {}

ConsumerServiceImpl::~ConsumerServiceImpl() { Stop().IgnoreError(); }

absl::StatusOr<std::unique_ptr<ConsumerService>> ConsumerServiceImpl::Create(
    ConsumerServiceDeps deps) {
  if (!deps.clock || !deps.store || !deps.timers || !deps.db || !deps.queue_count) {
    return absl::InvalidArgumentError("ConsumerServiceDeps: every dependency is required");
  }
  std::unique_ptr<ConsumerServiceImpl> svc(new ConsumerServiceImpl(std::move(deps)));
  TOKIMQ_RETURN_IF_ERROR(svc->Recover());
  return std::unique_ptr<ConsumerService>(std::move(svc));
}

absl::Status ConsumerServiceImpl::WriteSynced(rocksdb::WriteBatch* batch) {
  if (admit_state_write_) TOKIMQ_RETURN_IF_ERROR(admit_state_write_(batch->GetDataSize()));
  if (log_state_write_) TOKIMQ_RETURN_IF_ERROR(log_state_write_(*batch));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = db_->Write(wo, batch);
  if (!s.ok()) return absl::UnavailableError("group state write failed: " + s.ToString());
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::WriteState(rocksdb::WriteBatch* batch) {
  if (admit_state_write_) TOKIMQ_RETURN_IF_ERROR(admit_state_write_(batch->GetDataSize()));
  if (log_state_write_) TOKIMQ_RETURN_IF_ERROR(log_state_write_(*batch));
  rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), batch);
  if (!s.ok()) return absl::UnavailableError("group state write failed: " + s.ToString());
  wal_dirty_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::SyncIfDirty() {
  if (!wal_dirty_.exchange(false, std::memory_order_acq_rel)) return absl::OkStatus();
  rocksdb::Status s = db_->SyncWAL();
  if (!s.ok()) {
    wal_dirty_.store(true);
    return absl::UnavailableError("group state WAL sync failed: " + s.ToString());
  }
  return absl::OkStatus();
}

void ConsumerServiceImpl::StageLeases(const Progress* p, const std::vector<int64_t>& drop,
                                      const std::vector<BlockLease>& replace,
                                      rocksdb::WriteBatch* batch) {
  std::vector<int64_t> blocks;
  auto touch = [&](int64_t offset, const LeaseRecord* replacement) {
    const LeaseRecord& lease = p->leases.at(offset);
    if (lease.block != kLegacyLeaseKey) {
      if (blocks.empty() || blocks.back() != lease.block) blocks.push_back(lease.block);
      return;
    }
    std::string key = LeaseKey(p->key, offset);
    if (replacement == nullptr) {
      batch->Delete(key);
    } else {
      batch->Put(key, EncodeLeaseValue(key, *replacement));
    }
  };
  for (int64_t offset : drop) touch(offset, nullptr);
  for (const auto& [offset, lease] : replace) touch(offset, &lease);
  auto replacement_of = [&](int64_t offset) -> const LeaseRecord* {
    auto it = std::lower_bound(replace.begin(), replace.end(), offset,
                               [](const BlockLease& b, int64_t o) { return b.first < o; });
    return it != replace.end() && it->first == offset ? &it->second : nullptr;
  };
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::vector<BlockLease> keep;
  for (int64_t block : blocks) {
    keep.clear();
    for (auto it = p->leases.lower_bound(block);
         it != p->leases.end() && it->second.block == block; ++it) {
      if (std::binary_search(drop.begin(), drop.end(), it->first)) continue;
      const LeaseRecord* r = replace.empty() ? nullptr : replacement_of(it->first);
      keep.emplace_back(it->first, r ? *r : it->second);
    }
    std::string key = LeaseBlockKey(p->key, block);
    if (keep.empty()) {
      batch->Delete(key);
    } else {
      batch->Put(key, EncodeLeaseBlockValue(key, keep));
    }
  }
}

Progress* ConsumerServiceImpl::GetProgress(const QueueKey& key) {
  {
    std::lock_guard<std::mutex> l(map_mu_);
    auto it = progress_.find(key);
    if (it != progress_.end()) return it->second.get();
  }
  // Topic metadata is read without map_mu_ held (it takes the metadata store's locks).
  const bool fifo = key.read_topic == key.topic && is_fifo_ && is_fifo_(key.topic) &&
                    ConsumesInOrder(key.group, true);
  std::lock_guard<std::mutex> l(map_mu_);
  auto& slot = progress_[key];
  if (!slot) slot = std::make_unique<Progress>(key, fifo);
  return slot.get();
}

Progress* ConsumerServiceImpl::FindProgress(const QueueKey& key) const {
  std::lock_guard<std::mutex> l(map_mu_);
  auto it = progress_.find(key);
  return it == progress_.end() ? nullptr : it->second.get();
}

ConsumerServiceImpl::GroupState* ConsumerServiceImpl::GetGroup(const std::string& group) {
  std::lock_guard<std::mutex> l(map_mu_);
  auto& slot = groups_[group];
  if (!slot) slot = std::make_unique<GroupState>();
  return slot.get();
}

bool ConsumerServiceImpl::ConsumesInOrder(const std::string& group, bool by_default) const {
  if (!group_orderly_) return true;
  return group_orderly_(group).value_or(by_default);
}

GroupPolicy ConsumerServiceImpl::PolicyOf(const std::string& group) {
  GroupState* g = GetGroup(group);
  std::lock_guard<std::mutex> l(map_mu_);
  return g->policy;
}

void ConsumerServiceImpl::SetGroupPolicy(const std::string& group, GroupPolicy policy) {
  if (!IsValidGroupName(group)) {
    TOKIMQ_LOG_WARN("consumer: SetGroupPolicy ignored: {}", ValidateGroupName(group).ToString());
    return;
  }
  if (policy.max_attempts < 1) policy.max_attempts = 1;
  if (policy.ttl_ms < 0) policy.ttl_ms = 0;
  if (policy.backoff_ms.size() > 64) policy.backoff_ms.resize(64);
  GroupState* g = GetGroup(group);
  {
    std::lock_guard<std::mutex> l(map_mu_);
    g->policy = policy;
  }
  rocksdb::WriteBatch batch;
  batch.Put(PolicyKey(group), EncodePolicyValue(PolicyKey(group), policy));
  absl::Status s = WriteSynced(&batch);
  if (!s.ok()) TOKIMQ_LOG_ERROR("consumer: persisting policy of {}: {}", group, s.ToString());
}

int64_t ConsumerServiceImpl::InFlight(const std::string& group) const {
  std::lock_guard<std::mutex> l(map_mu_);
  auto it = groups_.find(group);
  return it == groups_.end() ? 0 : it->second->in_flight.load();
}

int64_t ConsumerServiceImpl::Parked(const std::string& group) const {
  std::vector<Progress*> mine;
  {
    std::lock_guard<std::mutex> l(map_mu_);
    for (auto it = progress_.lower_bound(QueueKey{group, "", "", 0});
         it != progress_.end() && it->first.group == group; ++it) {
      mine.push_back(it->second.get());
    }
  }
  int64_t n = 0;
  for (Progress* p : mine) {
    std::lock_guard<std::mutex> l(p->mu);
    n += static_cast<int64_t>(p->fifo_index.parked());
  }
  return n;
}

int64_t ConsumerServiceImpl::DlqDepth(const std::string& group) const {
  std::string dlq = DlqTopic(group);
  return store_->MaxQueueOffset(dlq, 0) - store_->MinQueueOffset(dlq, 0);
}

absl::Status ConsumerServiceImpl::LockLease(const std::string& group, const std::string& handle,
                                            Receipt* receipt, Progress** p,
                                            std::unique_lock<std::mutex>* lock,
                                            LeaseRecord** lease) {
  TOKIMQ_RETURN_IF_ERROR(ValidateGroupName(group));
  TOKIMQ_ASSIGN_OR_RETURN(*receipt, DecodeReceipt(handle, secret_));
  if (receipt->queue.group != group) {
    return absl::InvalidArgumentError("receipt handle belongs to another consumer group");
  }
  *p = FindProgress(receipt->queue);
  if (*p != nullptr) {
    *lock = std::unique_lock<std::mutex>((*p)->mu);
    auto it = (*p)->leases.find(receipt->queue_offset);
    if (it != (*p)->leases.end() && it->second.epoch == receipt->epoch && !it->second.parked) {
      *lease = &it->second;
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(
      "receipt handle is stale: the delivery was already acked, nacked, renewed, or its lease "
      "expired");
}

absl::Status ConsumerServiceImpl::Ack(const std::string& group, const std::string& handle) {
  return AckBatch(group, {std::string_view(handle)})[0];
}

std::vector<absl::Status> ConsumerServiceImpl::AckBatch(
    const std::string& group, const std::vector<std::string_view>& handles) {
  AckBatchState st;
  st.out.resize(handles.size());
  if (absl::Status name = ValidateGroupName(group); !name.ok()) {
    for (absl::Status& o : st.out) o = name;
    return std::move(st.out);
  }
  DecodeAckHandles(group, handles, &st);
  // Progress objects touched, locked in address order: nothing else ever holds two Progress
  // mutexes, so this cannot deadlock.
  std::map<Progress*, std::unique_lock<std::mutex>> locks;
  for (Progress* p : st.owner) {
    if (p) locks.emplace(p, std::unique_lock<std::mutex>());
  }
  for (auto& [p, lock] : locks) lock = std::unique_lock<std::mutex>(p->mu);
  MatchLiveLeases(&st);
  if (!st.acked.empty()) CommitAcks(group, &st);
  return std::move(st.out);
}

void ConsumerServiceImpl::DecodeAckHandles(const std::string& group,
                                           const std::vector<std::string_view>& handles,
                                           AckBatchState* st) const {
  st->receipts.resize(handles.size());
  st->owner.assign(handles.size(), nullptr);
  for (size_t i = 0; i < handles.size(); ++i) {
    absl::StatusOr<Receipt> r = DecodeReceipt(handles[i], secret_);
    if (!r.ok()) {
      st->out[i] = r.status();
    } else if (r->queue.group != group) {
      st->out[i] = absl::InvalidArgumentError("receipt handle belongs to another consumer group");
    } else {
      st->receipts[i] = std::move(*r);
      // Handles of one batch usually name one queue: skip the map lookup for repeats.
      st->owner[i] = i > 0 && st->owner[i - 1] && st->receipts[i].queue == st->receipts[i - 1].queue
                         ? st->owner[i - 1]
                         : FindProgress(st->receipts[i].queue);
    }
  }
}

void ConsumerServiceImpl::MatchLiveLeases(AckBatchState* st) {
  for (size_t i = 0; i < st->out.size(); ++i) {
    if (!st->out[i].ok()) continue;
    Progress* p = st->owner[i];
    const int64_t offset = st->receipts[i].queue_offset;
    bool live = false;
    if (p) {
      auto it = p->leases.find(offset);
      live = it != p->leases.end() && it->second.epoch == st->receipts[i].epoch &&
             !it->second.parked;
      if (live) {
        std::vector<int64_t>& d = st->drops[p];
        // A handle repeated in the batch is OK once.
        live = std::find(d.begin(), d.end(), offset) == d.end();
        if (live) d.push_back(offset);
      }
    }
    if (!live) {
      st->out[i] = absl::FailedPreconditionError(
          "receipt handle is stale: the delivery was already acked, nacked, renewed, or its "
          "lease expired");
      continue;
    }
    st->acked.push_back(i);
  }
}

void ConsumerServiceImpl::CommitAcks(const std::string& group, AckBatchState* st) {
  rocksdb::WriteBatch batch;
  for (auto& [p, d] : st->drops) {
    std::sort(d.begin(), d.end());
    StageLeases(p, d, {}, &batch);
  }
  // WAL without fsync, synced by the background syncer (class comment): an ack undone by a
  // power loss is a duplicate delivery, which at-least-once allows.
  absl::Status s = WriteState(&batch);
  GroupState* g = GetGroup(group);
  if (!s.ok()) {
    for (size_t i : st->acked) st->out[i] = s;
    return;
  }
  for (size_t i : st->acked) st->owner[i]->EraseLease(st->receipts[i].queue_offset);
  g->in_flight.fetch_sub(static_cast<int64_t>(st->acked.size()));
  g->acked.fetch_add(static_cast<int64_t>(st->acked.size()));
  // An ack in a FIFO queue unblocks the next message of the acked group.
  for (auto& [p, d] : st->drops) {
    if (p->fifo) {
      WakeReceivers(p->key.topic);
      break;
    }
  }
}

absl::StatusOr<std::string> ConsumerServiceImpl::ChangeInvisibleDuration(
    const std::string& group, const std::string& handle, int64_t invisible_ms) {
  if (invisible_ms <= 0 || invisible_ms > kMaxInvisibleMs) {
    return absl::InvalidArgumentError("invisible duration must be in (0 ms, 12 h]");
  }
  Receipt r;
  Progress* p = nullptr;
  std::unique_lock<std::mutex> lock;
  LeaseRecord* lease = nullptr;
  TOKIMQ_RETURN_IF_ERROR(LockLease(group, handle, &r, &p, &lock, &lease));
  LeaseRecord next = *lease;
  next.epoch += 1;
  next.invisible_until_ms = clock_->NowMs() + invisible_ms;
  rocksdb::WriteBatch batch;
  StageLeases(p, {}, {BlockLease{r.queue_offset, next}}, &batch);
  TOKIMQ_RETURN_IF_ERROR(WriteState(&batch));
  *lease = next;
  expiries_.Add(next.invisible_until_ms, Expiry{p, r.queue_offset, r.queue_offset});
  Receipt out{p->key, r.queue_offset, next.epoch, next.invisible_until_ms};
  return EncodeReceipt(out, secret_);
}

absl::Status ConsumerServiceImpl::Nack(const std::string& group, const std::string& handle,
                                       std::optional<int64_t> delay_ms) {
  if (delay_ms && (*delay_ms < 0 || *delay_ms > kMaxNackDelayMs)) {
    return absl::InvalidArgumentError("nack delay must be in [0, 7 days]");
  }
  Receipt r;
  Progress* p = nullptr;
  std::unique_lock<std::mutex> lock;
  LeaseRecord* lease = nullptr;
  TOKIMQ_RETURN_IF_ERROR(LockLease(group, handle, &r, &p, &lock, &lease));
  rocksdb::WriteBatch batch;
  return EndLease(p, r.queue_offset, delay_ms, &batch);
}

void ConsumerServiceImpl::WakeReceivers(const std::string& topic) {
  if (waiters_.load() == 0) return;
  wake_.Notify(topic);
}

void ConsumerServiceImpl::OnDispatch(const std::string& topic, int32_t queue_id,
                                     QueueOffset queue_offset) {
  // A long poller registers in waiters_ before it scans, so when waiters_ is 0 nobody can be
  // between a scan that missed this message and its wait.
  // No lock: this runs on the putting thread, e.g. the timer's realtime put (long_poll_wake.h).
  if (waiters_.load() > 0) wake_.Notify(topic);
}

absl::Status ConsumerServiceImpl::Start() {
  if (worker_.joinable()) return absl::OkStatus();
  stopping_ = false;
  worker_ = std::thread([this] { WorkerLoop(); });
  syncer_ = std::thread([this] { SyncLoop(); });
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::Stop() {
  stopping_ = true;
  wake_.WakeAll();
  {
    std::lock_guard<std::mutex> l(sync_mu_);
    sync_cv_.notify_all();
  }
  expiries_.Wake();
  if (worker_.joinable()) worker_.join();
  if (syncer_.joinable()) syncer_.join();
  return SyncIfDirty();
}

void ConsumerServiceImpl::SyncLoop() {
  // Real time by default, like the CommitLog's async flusher: this bounds what a power loss can
  // undo, it is not part of the message timeline (a ManualClock may never move). With
  // wal_sync_clock_ (injected by tests) that clock's time instead.
  std::unique_lock<std::mutex> l(sync_mu_);
  int64_t next_sync_ms = wal_sync_clock_ ? wal_sync_clock_->NowMs() + kWalSyncIntervalMs : 0;
  while (!stopping_.load()) {
    if (wal_sync_clock_ == nullptr) {
      sync_cv_.wait_for(l, std::chrono::milliseconds(kWalSyncIntervalMs),
                        [&] { return stopping_.load(); });
    } else {
      l.unlock();
      wal_sync_clock_->WaitUntilMs(next_sync_ms, std::chrono::milliseconds(kWalSyncIntervalMs));
      l.lock();
      if (wal_sync_clock_->NowMs() < next_sync_ms) continue;
      next_sync_ms = wal_sync_clock_->NowMs() + kWalSyncIntervalMs;
    }
    if (stopping_.load()) break;
    l.unlock();
    absl::Status s = SyncIfDirty();
    if (!s.ok()) TOKIMQ_LOG_ERROR("consumer: {}", s.ToString());
    l.lock();
  }
}

void ConsumerServiceImpl::WorkerLoop() {
  // Logged once per state change (a full disk fails every retry copy for as long as it lasts).
  absl::StatusCode failing = absl::StatusCode::kOk;
  while (!stopping_.load()) {
    absl::Status s = RunUntilIdle();
    if (!s.ok() && s.code() != failing) {
      TOKIMQ_LOG_ERROR(
          "consumer: lease expiry processing: {} (retried every 100 ms, logged "
          "once until it succeeds)",
          s.ToString());
    } else if (s.ok() && failing != absl::StatusCode::kOk) {
      TOKIMQ_LOG_INFO("consumer: lease expiry processing succeeds again");
    }
    failing = s.code();
    const int64_t next = expiries_.NextMs();
    // After an error, retry no sooner than 100 ms (a failing store must not spin this thread).
    int64_t wait_ms = next == INT64_MAX ? 1000 : std::clamp<int64_t>(next - clock_->NowMs(), 0, 1000);
    if (!s.ok()) wait_ms = std::max<int64_t>(wait_ms, 100);
    if (clock_->IsManual()) {
      // Manual time moves by admin request: wake on it (and at least every 50 ms for new
      // entries earlier than `next`).
      clock_->WaitUntilMs(s.ok() ? next : INT64_MAX, std::chrono::milliseconds(50));
      continue;
    }
    expiries_.WaitForEarlier(next, std::chrono::milliseconds(wait_ms),
                             [&] { return stopping_.load(); });
  }
}

}  // namespace consumer
}  // namespace tokimq
