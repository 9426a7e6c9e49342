// MessageStoreImpl: CommitLog + ConsumeQueues, dispatch, recovery of the queues, retention.
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
#include "checkpoint_sync.h"
#include "commit_log_impl.h"
#include "commitlog/consume_queue.h"
#include "commitlog/record.h"
#include "common/fnv1a.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/status.h"
#include "offset_file.h"

namespace tokimq {

int64_t DurableEnd(std::span<const PutResult> puts) {
  int64_t end = 0;
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
                                                int64_t from_offset, int max_count,
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

constexpr size_t kMaxReadRun = 1 << 20;
// ReadMany reads across a gap between two requested records when the gap is at most this many
// bytes: copying a few KiB from the page cache is cheaper than one more pread.
constexpr int64_t kMaxReadGap = 8 << 10;

// The put rule: common/names.h's destination rule, and a queue id >= 0.
absl::Status CheckDestination(const std::string& topic, int32_t queue_id) {
  TOKIMQ_RETURN_IF_ERROR(ValidateDestination(topic));
  if (queue_id < 0) return absl::InvalidArgumentError(absl::StrCat("invalid queue id ", queue_id));
  return absl::OkStatus();
}

// ConsumeQueue directories recovery loads: the looser rule puts followed before the name rule
// (1..255 of [A-Za-z0-9_%|.-], not "." or ".."), so queues written by older brokers (say a
// retry topic of a group the name rule now refuses) stay readable.
bool LoadableQueueDir(const std::string& topic) {
  if (topic.empty() || topic.size() > kMaxDestinationBytes || topic == "." || topic == "..") {
    return false;
  }
  for (char c : topic) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '%' || c == '|' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool SameDestination(const Message& a, const Message& b) {
  return a.queue_id == b.queue_id && a.topic == b.topic;
}

uint64_t TagHashOf(const Message& m) {
  if (!m.encoded_properties.empty()) {
    std::string_view tag;
    return record::FindProperty(m.encoded_properties, prop::kTag, &tag) ? TagHash(tag) : 0;
  }
  auto it = m.properties.find(prop::kTag);
  return it == m.properties.end() ? 0 : TagHash(it->second);
}

class MessageStoreImpl final : public MessageStore {
 public:
  MessageStoreImpl(FileSystem* fs, Clock* clock, MessageStoreOptions opt)
      : fs_(fs), clock_(clock), opt_(std::move(opt)), cq_files_(fs, opt_.max_open_files) {}
  ~MessageStoreImpl() override { StopCheckpointer(); }

  absl::Status Init() {
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

  absl::StatusOr<PutResult> Put(Message msg) override {
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

  absl::StatusOr<std::vector<PutResult>> PutBatch(std::vector<Message> msgs) override {
    TOKIMQ_ASSIGN_OR_RETURN(std::vector<PutResult> out, PutBatchNoWait(std::move(msgs)));
    if (opt_.commitlog.flush_mode == FlushMode::kSync && !out.empty()) {
      TOKIMQ_RETURN_IF_ERROR(log_->WaitDurable(DurableEnd(out)));
    }
    return out;
  }

  absl::StatusOr<std::vector<PutResult>> PutBatchNoWait(std::vector<Message> msgs) override {
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
      absl::flat_hash_map<ConsumeQueue*, int64_t> next;
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

  absl::StatusOr<Message> Read(int64_t physical_offset) const override {
    return log_->Read(physical_offset);
  }

  std::vector<absl::StatusOr<Message>> ReadMany(std::span<const ReadRequest> reqs) const override {
    std::vector<absl::StatusOr<Message>> out(reqs.size(), absl::UnknownError("unread"));
    VisitMany(reqs, [&out](size_t i, const absl::StatusOr<record::RecordView>& view) {
      if (!view.ok()) {
        out[i] = view.status();
        return;
      }
      Message m;
      record::MessageFromView(*view, &m);
      out[i] = std::move(m);
    });
    return out;
  }

  void VisitMany(std::span<const ReadRequest> reqs,
                 const IndexedRecordVisitor& visit) const override {
    std::vector<size_t> order(reqs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return reqs[a].physical_offset < reqs[b].physical_offset;
    });
    const int64_t seg_size = log_->segment_size();
    std::string buf;
    size_t i = 0;
    while (i < order.size()) {
      // A run of requests close together in one segment: one pread covers all of them.
      const ReadRequest& first = reqs[order[i]];
      const int64_t start = first.physical_offset;
      int64_t end = start + first.size;
      size_t j = i + 1;
      while (j < order.size()) {
        const ReadRequest& r = reqs[order[j]];
        const int64_t r_end = r.physical_offset + r.size;
        if (r.physical_offset < 0 || r.physical_offset - end > kMaxReadGap ||
            r_end - start > static_cast<int64_t>(kMaxReadRun) ||
            r.physical_offset / seg_size != start / seg_size) {
          break;
        }
        end = std::max(end, r_end);
        ++j;
      }
      std::shared_ptr<const Segment> keep;
      absl::StatusOr<std::string_view> run = absl::NotFoundError("");
      if (start >= 0 && first.size >= record::kMinMessageSize &&
          end - start <= static_cast<int64_t>(kMaxReadRun)) {
        run = log_->ReadSpan(start, static_cast<size_t>(end - start), &buf, &keep);
      }
      for (size_t k = i; k < j; ++k) {
        const ReadRequest& r = reqs[order[k]];
        if (run.ok() && r.size >= record::kMinMessageSize && r.physical_offset + r.size <= end) {
          record::RecordView view;
          const auto rel = static_cast<size_t>(r.physical_offset - start);
          if (log_->DecodeViewAt(run->substr(rel, r.size), r.physical_offset, &view).ok()) {
            visit(order[k], view);
            continue;
          }
        }
        // Anything unusual (wrong size, deleted, past the end, corrupt): Read gives the
        // exact answer and error.
        VisitEncoded(log_->Read(r.physical_offset), order[k], visit);
      }
      i = j;
    }
  }

  absl::StatusOr<std::optional<ConsumeQueueEntry>> GetEntry(const std::string& topic,
                                                            int32_t queue_id,
                                                            int64_t queue_offset) const override {
    auto cq = Find(topic, queue_id);
    if (cq == nullptr) return std::nullopt;
    if (queue_offset < cq->MinValidOffset() && queue_offset < cq->MaxOffset()) {
      return absl::NotFoundError(absl::StrCat("queue offset ", queue_offset, " of ", topic, "/",
                                              queue_id, " was deleted"));
    }
    return cq->Get(queue_offset);
  }

  absl::StatusOr<std::vector<Message>> ReadQueue(const std::string& topic, int32_t queue_id,
                                                 int64_t from_offset,
                                                 int max_count) const override {
    std::vector<Message> out;
    TOKIMQ_RETURN_IF_ERROR(VisitQueue(topic, queue_id, from_offset, max_count,
                                      [&out](const record::RecordView& v) {
                                        record::MessageFromView(v, &out.emplace_back());
                                        return absl::OkStatus();
                                      })
                               .status());
    return out;
  }

  absl::StatusOr<size_t> VisitQueue(const std::string& topic, int32_t queue_id,
                                    int64_t from_offset, int max_count,
                                    const RecordVisitor& visit) const override {
    size_t visited = 0;
    auto cq = Find(topic, queue_id);
    if (cq == nullptr || max_count <= 0) return visited;
    const int64_t start = std::max(from_offset, cq->MinValidOffset());
    TOKIMQ_ASSIGN_OR_RETURN(auto entries, cq->Entries(start, static_cast<size_t>(max_count)));
    const int64_t min_phys = log_->MinOffset();
    const int64_t seg_size = log_->segment_size();
    std::string buf;
    size_t i = 0;
    while (i < entries.size()) {
      if (entries[i].physical_offset < min_phys) {
        ++i;
        continue;
      }
      // A run of records close together in the CommitLog (gaps of at most kMaxReadGap, which
      // hold other queues' records of the same batches) and in one segment is read with one
      // pread: the queues of a topic interleave in the log, so a queue's records are rarely
      // adjacent, and a pread per record was the largest cost of consuming (perf, e2e mode).
      const int64_t run_start = entries[i].physical_offset;
      size_t j = i + 1;
      int64_t end = run_start + entries[i].size;
      while (j < entries.size() && entries[j].physical_offset >= end &&
             entries[j].physical_offset - end <= kMaxReadGap &&
             entries[j].physical_offset / seg_size == run_start / seg_size &&
             entries[j].physical_offset + entries[j].size - run_start <=
                 static_cast<int64_t>(kMaxReadRun)) {
        end = entries[j].physical_offset + entries[j].size;
        ++j;
      }
      std::shared_ptr<const Segment> keep;
      absl::StatusOr<std::string_view> run =
          log_->ReadSpan(run_start, static_cast<size_t>(end - run_start), &buf, &keep);
      if (absl::IsNotFound(run.status())) {  // deleted by retention meanwhile
        i = j;
        continue;
      }
      TOKIMQ_RETURN_IF_ERROR(run.status());
      for (size_t k = i; k < j; ++k) {
        record::RecordView v;
        const auto pos = static_cast<size_t>(entries[k].physical_offset - run_start);
        TOKIMQ_RETURN_IF_ERROR(log_->DecodeViewAt(run->substr(pos, entries[k].size),
                                                  entries[k].physical_offset, &v));
        const int64_t qo = start + static_cast<int64_t>(k);
        if (v.topic != topic || v.queue_id != queue_id || v.queue_offset != qo) {
          return absl::DataLossError(absl::StrCat(
              "consume queue ", topic, "/", queue_id, " entry ", qo, " points at offset ",
              entries[k].physical_offset, " which holds ", std::string(v.topic), "/", v.queue_id,
              "#", v.queue_offset));
        }
        TOKIMQ_RETURN_IF_ERROR(visit(v));
        ++visited;
      }
      i = j;
    }
    return visited;
  }

  int64_t MinQueueOffset(const std::string& topic, int32_t queue_id) const override {
    auto cq = Find(topic, queue_id);
    return cq == nullptr ? 0 : std::min(cq->MinValidOffset(), cq->MaxOffset());
  }
  int64_t MaxQueueOffset(const std::string& topic, int32_t queue_id) const override {
    auto cq = Find(topic, queue_id);
    return cq == nullptr ? 0 : cq->MaxOffset();
  }

  void SetDispatchListener(DispatchListener listener) override { listener_ = std::move(listener); }

  void AddPinProvider(PinProvider pin) override { (void)AddRemovablePinProvider(std::move(pin)); }
  PinId AddRemovablePinProvider(PinProvider pin) override {
    std::lock_guard<std::mutex> l(pin_mu_);
    const PinId id = next_pin_id_++;
    pins_.emplace_back(id, std::move(pin));
    return id;
  }
  void RemovePinProvider(PinId id) override {
    std::lock_guard<std::mutex> l(pin_mu_);
    std::erase_if(pins_, [id](const auto& p) { return p.first == id; });
  }

  PinId AddRetentionHook(RetentionHook hook) override {
    std::lock_guard<std::mutex> l(hook_mu_);
    const PinId id = next_pin_id_.fetch_add(1);
    hooks_.emplace_back(id, std::move(hook));
    return id;
  }
  void RemoveRetentionHook(PinId id) override {
    std::lock_guard<std::mutex> l(hook_mu_);
    std::erase_if(hooks_, [id](const auto& h) { return h.first == id; });
  }

  absl::StatusOr<int> DeleteExpired(int64_t retention_ms) override {
    absl::Status hook_status;
    {
      // hook_mu_ also serialises DeleteExpired calls (hooks run one pass at a time).
      std::lock_guard<std::mutex> l(hook_mu_);
      if (!hooks_.empty()) {
        TOKIMQ_ASSIGN_OR_RETURN(int64_t expired_end, log_->ExpiredEnd(retention_ms));
        if (expired_end > log_->MinOffset()) {
          for (const auto& [id, hook] : hooks_) {
            absl::Status s = hook(expired_end);
            if (hook_status.ok()) hook_status = s;
          }
        }
      }
    }
    int64_t pinned = INT64_MAX;
    {
      std::lock_guard<std::mutex> l(pin_mu_);
      for (const auto& [id, p] : pins_) pinned = std::min(pinned, p());
    }
    TOKIMQ_ASSIGN_OR_RETURN(int n, log_->DeleteExpiredSegments(retention_ms, pinned));
    if (n > 0) {
      const int64_t min = log_->MinOffset();
      for (const auto& cq : AllQueues()) TOKIMQ_RETURN_IF_ERROR(cq->AdvanceMinValid(min));
    }
    if (!hook_status.ok()) return hook_status;
    return n;
  }

  absl::Status Flush() override {
    TOKIMQ_RETURN_IF_ERROR(log_->Flush());
    return Checkpoint();
  }

  CommitLog* commit_log() override { return log_.get(); }
  const FileCache* file_cache() const override { return &cq_files_; }

  absl::Status Close() override {
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

 private:
  std::shared_ptr<ConsumeQueue> Find(const std::string& topic, int32_t queue_id) const {
    std::shared_lock<std::shared_mutex> l(map_mu_);
    auto t = queues_.find(topic);
    if (t == queues_.end()) return nullptr;
    auto q = t->second.find(queue_id);
    return q == t->second.end() ? nullptr : q->second;
  }

  // Caller holds put_mu_ (or is recovering).
  absl::StatusOr<std::shared_ptr<ConsumeQueue>> FindOrCreate(const std::string& topic,
                                                             int32_t queue_id) {
    if (auto cq = Find(topic, queue_id)) return cq;
    TOKIMQ_ASSIGN_OR_RETURN(
        std::shared_ptr<ConsumeQueue> cq,
        ConsumeQueue::Open(&cq_files_,
                           absl::StrCat(opt_.dir, "/consumequeue/", topic, "/", queue_id),
                           opt_.consume_queue_segment_entries));
    std::unique_lock<std::shared_mutex> l(map_mu_);
    queues_[topic][queue_id] = cq;
    return cq;
  }

  std::vector<std::shared_ptr<ConsumeQueue>> AllQueues() const {
    std::vector<std::shared_ptr<ConsumeQueue>> all;
    std::shared_lock<std::shared_mutex> l(map_mu_);
    for (const auto& [topic, qs] : queues_) {
      for (const auto& [id, cq] : qs) all.push_back(cq);
    }
    return all;
  }

  absl::Status RecoverQueues();
  absl::Status DropSuspectTail(ConsumeQueue* cq, int64_t start);
  absl::Status Checkpoint();
  void CheckpointLoop();
  void StopCheckpointer() {
    {
      std::lock_guard<std::mutex> l(cp_mu_);
      stop_ = true;
    }
    cp_cv_.notify_all();
    if (checkpointer_.joinable()) checkpointer_.join();
  }

  FileSystem* fs_;
  Clock* clock_;
  MessageStoreOptions opt_;
  FileCache cq_files_;  // the ConsumeQueues' files; declared before (destroyed after) queues_
  std::unique_ptr<CommitLogImpl> log_;

  std::mutex put_mu_;  // serialises Put/PutBatch; held before map_mu_
  bool closed_ = false;
  mutable std::shared_mutex map_mu_;
  absl::flat_hash_map<std::string, absl::flat_hash_map<int32_t, std::shared_ptr<ConsumeQueue>>>
      queues_;
  DispatchListener listener_;
  std::mutex pin_mu_;
  std::vector<std::pair<PinId, PinProvider>> pins_;  // guarded by pin_mu_
  std::atomic<PinId> next_pin_id_{1};
  std::mutex hook_mu_;  // held during DeleteExpired's hook calls; never with pin_mu_
  std::vector<std::pair<PinId, RetentionHook>> hooks_;  // guarded by hook_mu_

  std::mutex checkpoint_mu_;  // one Checkpoint at a time
  std::unique_ptr<CheckpointSync> cp_sync_;  // used under checkpoint_mu_
  std::mutex cp_mu_;
  std::condition_variable cp_cv_;
  bool stop_ = false;
  std::thread checkpointer_;
};

// Entries pointing at or past `start` (the rescan point) were written after the last
// checkpoint and may be torn or missing: drop them; the rescan re-adds them.
absl::Status MessageStoreImpl::DropSuspectTail(ConsumeQueue* cq, int64_t start) {
  const int64_t log_end = log_->MaxOffset();
  int64_t keep = cq->MaxOffset();
  const int64_t min = cq->MinOffset();
  while (keep > min) {
    const int64_t from = std::max(min, keep - 1024);
    TOKIMQ_ASSIGN_OR_RETURN(auto entries, cq->Entries(from, static_cast<size_t>(keep - from)));
    bool stop = false;
    for (size_t i = entries.size(); i > 0; --i) {
      const auto& e = entries[i - 1];
      if (e.physical_offset >= start || e.size < record::kMinMessageSize ||
          e.physical_offset + e.size > log_end) {
        --keep;
      } else {
        stop = true;
        break;
      }
    }
    if (stop) break;
  }
  return cq->TruncateTo(keep);
}

absl::Status MessageStoreImpl::RecoverQueues() {
  const std::string root = opt_.dir + "/consumequeue";
  TOKIMQ_RETURN_IF_ERROR(fs_->CreateDirs(root));
  const int64_t log_min = log_->MinOffset(), log_max = log_->MaxOffset();
  int64_t start = log_min;
  auto cp = ReadOffsetFile(fs_, opt_.dir + "/checkpoint", kStoreCheckpointMagic);
  if (cp.ok()) {
    start = std::clamp(*cp, log_min, log_max);
  } else if (!absl::IsNotFound(cp.status())) {
    TOKIMQ_LOG_WARN("store checkpoint unreadable, rebuilding queues from {}: {}", log_min,
                    cp.status().ToString());
  }
  TOKIMQ_ASSIGN_OR_RETURN(auto topics, cq_files_.ListDir(root));
  for (const std::string& topic : topics) {
    if (!LoadableQueueDir(topic)) continue;
    TOKIMQ_ASSIGN_OR_RETURN(auto ids, cq_files_.ListDir(root + "/" + topic));
    for (const std::string& id : ids) {
      if (id.empty() || id.size() > 9 ||
          !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        continue;
      }
      TOKIMQ_ASSIGN_OR_RETURN(auto cq, FindOrCreate(topic, std::stoi(id)));
      TOKIMQ_RETURN_IF_ERROR(DropSuspectTail(cq.get(), start));
    }
  }
  // Re-dispatch everything from the rescan point.
  int64_t off = start, redispatched = 0;
  while (off < log_max) {
    TOKIMQ_ASSIGN_OR_RETURN(auto rec, log_->ReadNext(off));
    const Message& m = rec.first;
    if ((m.flags & kFlagIndexed) != 0 && LoadableQueueDir(m.topic) && m.queue_id >= 0) {
      TOKIMQ_ASSIGN_OR_RETURN(auto cq, FindOrCreate(m.topic, m.queue_id));
      if (m.queue_offset != cq->MaxOffset()) {
        return absl::DataLossError(absl::StrCat(
            "record at offset ", m.physical_offset, " has queue offset ", m.queue_offset,
            " but consume queue ", m.topic, "/", m.queue_id, " continues at ", cq->MaxOffset(),
            "; consume queue data below the checkpoint is missing"));
      }
      TOKIMQ_RETURN_IF_ERROR(
          cq->Append({m.physical_offset, static_cast<uint32_t>(rec.second - m.physical_offset),
                      TagHashOf(m)}));
      ++redispatched;
    }
    off = rec.second;
  }
  if (redispatched > 0) {
    TOKIMQ_LOG_INFO("message store {}: re-dispatched {} records from offset {}", opt_.dir,
                    redispatched, start);
  }
  for (const auto& cq : AllQueues()) TOKIMQ_RETURN_IF_ERROR(cq->AdvanceMinValid(log_min));
  return Checkpoint();
}

absl::Status MessageStoreImpl::Checkpoint() {
  std::lock_guard<std::mutex> cl(checkpoint_mu_);
  int64_t dispatched;
  std::vector<std::shared_ptr<ConsumeQueue>> all;
  {
    std::lock_guard<std::mutex> l(put_mu_);
    dispatched = log_->MaxOffset();
    all = AllQueues();
  }
  TOKIMQ_RETURN_IF_ERROR(cp_sync_->Sync(all));
  return WriteOffsetFile(fs_, opt_.dir + "/checkpoint", kStoreCheckpointMagic, dispatched);
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

}  // namespace

absl::StatusOr<std::unique_ptr<MessageStore>> MessageStore::Open(FileSystem* fs, Clock* clock,
                                                                 MessageStoreOptions options) {
  auto store = std::make_unique<MessageStoreImpl>(fs, clock, std::move(options));
  TOKIMQ_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<MessageStore>(std::move(store));
}

}  // namespace tokimq
