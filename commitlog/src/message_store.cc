// MessageStoreImpl: open, put (dispatch into the ConsumeQueues), retention, checkpoint, close.
// Reads live in message_store_read.cc, recovery in message_store_recovery.cc.
#include "commitlog/message_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "commitlog/record.h"
#include "common/fnv1a.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/status.h"
#include "message_store_impl.h"
#include "offset_file.h"

namespace tokimq {

PhysicalOffset DurableEnd(std::span<const PutResult> puts) {
  PhysicalOffset end(0);
  for (const PutResult& p : puts) end = std::max(end, p.physical_offset + int64_t{p.size});
  return end;
}

uint64_t TagHash(std::string_view tag) {
  if (tag.empty()) return 0;
  const uint64_t h = Fnv1a64(tag);  // 0 means "no tag": a tag that hashes to 0 counts as 1
  return h == 0 ? 1 : h;
}

std::vector<absl::StatusOr<Message>> MessageStore::ReadMany(
    std::span<const ReadRequest> reqs) const {
  std::vector<absl::StatusOr<Message>> out;
  out.reserve(reqs.size());
  for (const ReadRequest& r : reqs) out.push_back(Read(r.physical_offset));
  return out;
}

void MessageStore::VisitEncoded(const absl::StatusOr<Message>& read, size_t index,
                                const IndexedRecordVisitor& visit) {
  if (!read.ok()) return visit(index, read.status());
  std::string buf;
  record::Encode(*read, &buf);
  record::RecordView view;
  absl::Status s = record::DecodeView(buf, &view);
  if (!s.ok()) return visit(index, s);
  visit(index, view);
}

void MessageStore::VisitMany(std::span<const ReadRequest> reqs,
                             const IndexedRecordVisitor& visit) const {
  for (size_t i = 0; i < reqs.size(); ++i) VisitEncoded(Read(reqs[i].physical_offset), i, visit);
}

absl::StatusOr<size_t> MessageStore::VisitQueue(const std::string& topic, int32_t queue_id,
                                                QueueOffset from_offset, int max_count,
                                                const RecordVisitor& visit) const {
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<Message> msgs,
                          ReadQueue(topic, queue_id, from_offset, max_count));
  std::string buf;
  for (const Message& m : msgs) {
    buf.clear();
    record::Encode(m, &buf);
    record::RecordView view;
    TOKIMQ_RETURN_IF_ERROR(record::DecodeView(buf, &view));
    TOKIMQ_RETURN_IF_ERROR(visit(view));
  }
  return msgs.size();
}

namespace {

// The put rule: common/names.h's destination rule, and a queue id >= 0.
absl::Status CheckDestination(const std::string& topic, int32_t queue_id) {
  TOKIMQ_RETURN_IF_ERROR(ValidateDestination(topic));
  if (queue_id < 0) return absl::InvalidArgumentError(absl::StrCat("invalid queue id ", queue_id));
  return absl::OkStatus();
}

bool SameDestination(const Message& a, const Message& b) {
  return a.queue_id == b.queue_id && a.topic == b.topic;
}

}  // namespace

uint64_t TagHashOf(const Message& m) {
  if (!m.encoded_properties.empty()) {
    std::string_view tag;
    return record::FindProperty(m.encoded_properties, prop::kTag, &tag) ? TagHash(tag) : 0;
  }
  auto it = m.properties.find(prop::kTag);
  return it == m.properties.end() ? 0 : TagHash(it->second);
}

absl::Status MessageStoreImpl::Init() {
  if (opt_.dir.empty()) return absl::InvalidArgumentError("store dir is empty");
  TOKIMQ_RETURN_IF_ERROR(fs_->CreateDirs(opt_.dir + "/consumequeue"));
  // Before any queue file is written: its syncfs reports writeback errors from here on.
  TOKIMQ_ASSIGN_OR_RETURN(cp_sync_, CheckpointSync::Open(fs_, opt_.dir + "/consumequeue",
                                                         opt_.checkpoint_syncfs_above));
  opt_.commitlog.dir = opt_.dir + "/commitlog";
  TOKIMQ_ASSIGN_OR_RETURN(log_, CommitLogImpl::OpenImpl(fs_, clock_, opt_.commitlog, nullptr));
  TOKIMQ_RETURN_IF_ERROR(RecoverQueues());
  if (opt_.checkpoint_interval_ms > 0) {
    checkpointer_ = std::thread([this] { CheckpointLoop(); });
  }
  return absl::OkStatus();
}

absl::StatusOr<PutResult> MessageStoreImpl::Put(Message msg) {
  TOKIMQ_RETURN_IF_ERROR(CheckDestination(msg.topic, msg.queue_id));
  PutResult r;
  std::shared_ptr<ConsumeQueue> cq;
  {
    std::lock_guard<std::mutex> l(put_mu_);
    TOKIMQ_ASSIGN_OR_RETURN(cq, FindOrCreate(msg.topic, msg.queue_id));
    msg.queue_offset = cq->MaxOffset();
    Message* one[1] = {&msg};
    std::vector<uint32_t> sizes;
    TOKIMQ_RETURN_IF_ERROR(log_->AppendIndexed(one, &sizes));
    r.physical_offset = msg.physical_offset;
    r.queue_offset = msg.queue_offset;
    r.size = sizes[0];
    TOKIMQ_RETURN_IF_ERROR(cq->Append({r.physical_offset, r.size, TagHashOf(msg)}));
  }
  if (listener_) listener_(msg.topic, msg.queue_id, r.queue_offset);
  if (opt_.commitlog.flush_mode == FlushMode::kSync) {
    TOKIMQ_RETURN_IF_ERROR(log_->WaitDurable(r.physical_offset + r.size));
  }
  return r;
}

absl::StatusOr<std::vector<PutResult>> MessageStoreImpl::PutBatch(std::vector<Message> msgs) {
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<PutResult> out, PutBatchNoWait(std::move(msgs)));
  if (opt_.commitlog.flush_mode == FlushMode::kSync && !out.empty()) {
    TOKIMQ_RETURN_IF_ERROR(log_->WaitDurable(DurableEnd(out)));
  }
  return out;
}

absl::StatusOr<std::vector<PutResult>> MessageStoreImpl::PutBatchNoWait(std::vector<Message> msgs) {
  // A batch usually names one destination (the timer topic) or a few: validate and look up
  // a destination once per run of messages that share it.
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (i > 0 && SameDestination(msgs[i], msgs[i - 1])) continue;
    TOKIMQ_RETURN_IF_ERROR(CheckDestination(msgs[i].topic, msgs[i].queue_id));
  }
  std::vector<PutResult> out(msgs.size());
  if (msgs.empty()) return out;
  {
    std::lock_guard<std::mutex> l(put_mu_);
    std::vector<ConsumeQueue*> cqs;  // owned by queues_, which never drops a queue
    cqs.reserve(msgs.size());
    absl::flat_hash_map<ConsumeQueue*, QueueOffset> next;
    std::vector<Message*> ptrs;
    ptrs.reserve(msgs.size());
    for (size_t i = 0; i < msgs.size(); ++i) {
      Message& m = msgs[i];
      ConsumeQueue* cq;
      if (i > 0 && SameDestination(m, msgs[i - 1])) {
        cq = cqs.back();
      } else {
        TOKIMQ_ASSIGN_OR_RETURN(auto found, FindOrCreate(m.topic, m.queue_id));
        cq = found.get();
      }
      auto it = next.try_emplace(cq, cq->MaxOffset()).first;
      m.queue_offset = it->second++;
      cqs.push_back(cq);
      ptrs.push_back(&m);
    }
    std::vector<uint32_t> sizes;
    TOKIMQ_RETURN_IF_ERROR(log_->AppendIndexed(ptrs, &sizes));
    for (size_t i = 0; i < msgs.size(); ++i) {
      out[i] = {msgs[i].physical_offset, msgs[i].queue_offset, sizes[i]};
      TOKIMQ_RETURN_IF_ERROR(
          cqs[i]->Append({out[i].physical_offset, out[i].size, TagHashOf(msgs[i])}));
    }
  }
  if (listener_) {
    // Once per queue of the batch, with its last offset: a listener wakes long polls, and a
    // wake-up per message of a 128-message batch was most of the broker's futex time.
    absl::flat_hash_set<std::pair<std::string_view, int32_t>> told;
    for (size_t i = msgs.size(); i-- > 0;) {
      if (told.emplace(msgs[i].topic, msgs[i].queue_id).second) {
        listener_(msgs[i].topic, msgs[i].queue_id, out[i].queue_offset);
      }
    }
  }
  return out;
}

MessageStore::PinId MessageStoreImpl::AddRemovablePinProvider(PinProvider pin) {
  std::lock_guard<std::mutex> l(pin_mu_);
  const PinId id = next_pin_id_++;
  pins_.emplace_back(id, std::move(pin));
  return id;
}

void MessageStoreImpl::RemovePinProvider(PinId id) {
  std::lock_guard<std::mutex> l(pin_mu_);
  std::erase_if(pins_, [id](const auto& p) { return p.first == id; });
}

MessageStore::PinId MessageStoreImpl::AddRetentionHook(RetentionHook hook) {
  std::lock_guard<std::mutex> l(hook_mu_);
  const PinId id = next_pin_id_.fetch_add(1);
  hooks_.emplace_back(id, std::move(hook));
  return id;
}

void MessageStoreImpl::RemoveRetentionHook(PinId id) {
  std::lock_guard<std::mutex> l(hook_mu_);
  std::erase_if(hooks_, [id](const auto& h) { return h.first == id; });
}

absl::StatusOr<int> MessageStoreImpl::DeleteExpired(int64_t retention_ms) {
  absl::Status hook_status;
  {
    // hook_mu_ also serialises DeleteExpired calls (hooks run one pass at a time).
    std::lock_guard<std::mutex> l(hook_mu_);
    if (!hooks_.empty()) {
      TOKIMQ_ASSIGN_OR_RETURN(PhysicalOffset expired_end, log_->ExpiredEnd(retention_ms));
      if (expired_end > log_->MinOffset()) {
        for (const auto& [id, hook] : hooks_) {
          absl::Status s = hook(expired_end);
          if (hook_status.ok()) hook_status = s;
        }
      }
    }
  }
  PhysicalOffset pinned(INT64_MAX);
  {
    std::lock_guard<std::mutex> l(pin_mu_);
    for (const auto& [id, p] : pins_) pinned = std::min(pinned, p());
  }
  TOKIMQ_ASSIGN_OR_RETURN(int n, log_->DeleteExpiredSegments(retention_ms, pinned));
  if (n > 0) {
    const PhysicalOffset min = log_->MinOffset();
    for (const auto& cq : AllQueues()) TOKIMQ_RETURN_IF_ERROR(cq->AdvanceMinValid(min));
  }
  if (!hook_status.ok()) return hook_status;
  return n;
}

absl::Status MessageStoreImpl::Close() {
  StopCheckpointer();
  {
    std::lock_guard<std::mutex> l(put_mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
  }
  absl::Status s = Checkpoint();
  absl::Status c = log_->Close();
  return s.ok() ? c : s;
}

std::shared_ptr<ConsumeQueue> MessageStoreImpl::Find(const std::string& topic,
                                                     int32_t queue_id) const {
  std::shared_lock<std::shared_mutex> l(map_mu_);
  auto t = queues_.find(topic);
  if (t == queues_.end()) return nullptr;
  auto q = t->second.find(queue_id);
  return q == t->second.end() ? nullptr : q->second;
}

absl::StatusOr<std::shared_ptr<ConsumeQueue>> MessageStoreImpl::FindOrCreate(
    const std::string& topic, int32_t queue_id) {
  if (auto cq = Find(topic, queue_id)) return cq;
  TOKIMQ_ASSIGN_OR_RETURN(
      std::shared_ptr<ConsumeQueue> cq,
      ConsumeQueue::Open(&cq_files_, absl::StrCat(opt_.dir, "/consumequeue/", topic, "/", queue_id),
                         opt_.consume_queue_segment_entries));
  std::unique_lock<std::shared_mutex> l(map_mu_);
  queues_[topic][queue_id] = cq;
  return cq;
}

std::vector<std::shared_ptr<ConsumeQueue>> MessageStoreImpl::AllQueues() const {
  std::vector<std::shared_ptr<ConsumeQueue>> all;
  std::shared_lock<std::shared_mutex> l(map_mu_);
  for (const auto& [topic, qs] : queues_) {
    for (const auto& [id, cq] : qs) all.push_back(cq);
  }
  return all;
}

void MessageStoreImpl::StopCheckpointer() {
  {
    std::lock_guard<std::mutex> l(cp_mu_);
    stop_ = true;
  }
  cp_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
}

absl::Status MessageStoreImpl::Checkpoint() {
  std::lock_guard<std::mutex> cl(checkpoint_mu_);
  int64_t dispatched;
  std::vector<std::shared_ptr<ConsumeQueue>> all;
  {
    std::lock_guard<std::mutex> l(put_mu_);
    dispatched = log_->MaxOffset().value();
    all = AllQueues();
  }
  TOKIMQ_RETURN_IF_ERROR(cp_sync_->Sync(all));
  if (dispatched == stored_checkpoint_) return absl::OkStatus();  // the file says so already
  TOKIMQ_RETURN_IF_ERROR(
      WriteOffsetFile(fs_, opt_.dir + "/checkpoint", kStoreCheckpointMagic, dispatched));
  stored_checkpoint_ = dispatched;
  return absl::OkStatus();
}

void MessageStoreImpl::CheckpointLoop() {
  std::unique_lock<std::mutex> l(cp_mu_);
  bool failing = false;  // logged once per state change (a full disk fails every interval)
  while (!stop_) {
    cp_cv_.wait_for(l, std::chrono::milliseconds(opt_.checkpoint_interval_ms),
                    [&] { return stop_; });
    if (stop_) break;
    l.unlock();
    absl::Status s = Checkpoint();
    if (!s.ok() && !failing) {
      TOKIMQ_LOG_WARN("message store checkpoint failed: {} (retried every interval)", s.ToString());
    } else if (s.ok() && failing) {
      TOKIMQ_LOG_INFO("message store checkpoint succeeds again");
    }
    failing = !s.ok();
    l.lock();
  }
}

absl::StatusOr<std::unique_ptr<MessageStore>> MessageStore::Open(FileSystem* fs, Clock* clock,
                                                                 MessageStoreOptions options) {
  auto store = std::make_unique<MessageStoreImpl>(fs, clock, std::move(options));
  TOKIMQ_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<MessageStore>(std::move(store));
}

}  // namespace tokimq
