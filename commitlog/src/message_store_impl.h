// MessageStoreImpl: the MessageStore behind the public interface (commitlog/message_store.h has
// the contract). Private to the commitlog component.
//
// Files: message_store.cc (open, put, retention, checkpoint, close), message_store_read.cc
// (reads by offset and by queue, both through ReadRunEnd), message_store_recovery.cc (queue
// recovery and re-dispatch after a crash).
//
// Locking: put_mu_ serialises Put/PutBatch and is taken before map_mu_ (shared for look-ups,
// exclusive to add a queue). pin_mu_ guards pins_; hook_mu_ guards hooks_ and serialises
// DeleteExpired (never held with pin_mu_). checkpoint_mu_ allows one Checkpoint at a time and is
// taken before put_mu_; cp_mu_ guards the checkpoint thread's stop flag only.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "checkpoint_sync.h"
#include "commit_log_impl.h"
#include "commitlog/consume_queue.h"
#include "commitlog/message_store.h"
#include "common/status.h"

namespace tokimq {

// A read run spans at most this many bytes of one segment.
inline constexpr size_t kMaxReadRun = 1 << 20;
// A read run crosses a gap between two requested records when the gap is at most this many
// bytes: copying a few KiB from the page cache is cheaper than one more pread.
inline constexpr int64_t kMaxReadGap = 8 << 10;

// The read-merging rule of VisitMany and VisitQueue. Records are given by offset(k) and size(k)
// for k in [i, n), sorted by physical offset. Returns j, the end of the run that starts at record
// i: records [i, j) lie in the segment of record i, each starts at most kMaxReadGap bytes after
// the run so far ends and not before offset(i) (overlaps allowed), and the run,
// [offset(i), *end), spans at most kMaxReadRun bytes. A negative offset ends a run. One pread
// (CommitLog ReadSpan) then covers the whole run: the queues of a topic interleave in the log, so a
// queue's records are rarely adjacent, and a pread per record was the largest cost of consuming.
template <typename OffsetAt, typename SizeAt>
size_t ReadRunEnd(size_t i, size_t n, int64_t segment_size, const OffsetAt& offset,
                  const SizeAt& size, int64_t* end) {
  const int64_t start = offset(i);
  *end = start + size(i);
  size_t j = i + 1;
  for (; j < n; ++j) {
    const int64_t r = offset(j);
    const int64_t r_end = r + size(j);
    if (r < 0 || r < start || r - *end > kMaxReadGap ||
        r_end - start > static_cast<int64_t>(kMaxReadRun) ||
        r / segment_size != start / segment_size) {
      break;
    }
    *end = std::max(*end, r_end);
  }
  return j;
}

// The tag hash a ConsumeQueue entry of `m` carries (TagHash of its TAGS property).
uint64_t TagHashOf(const Message& m);

// ConsumeQueue directory names recovery loads (message_store_recovery.cc).
bool LoadableQueueDir(const std::string& topic);

class MessageStoreImpl final : public MessageStore {
 public:
  MessageStoreImpl(FileSystem* fs, Clock* clock, MessageStoreOptions opt)
      : fs_(fs), clock_(clock), opt_(std::move(opt)), cq_files_(fs, opt_.max_open_files) {}
  ~MessageStoreImpl() override { StopCheckpointer(); }

  // Opens the CommitLog, recovers the ConsumeQueues, starts the checkpoint thread.
  absl::Status Init();

  absl::StatusOr<PutResult> Put(Message msg) override;
  absl::StatusOr<std::vector<PutResult>> PutBatch(std::vector<Message> msgs) override;
  absl::StatusOr<std::vector<PutResult>> PutBatchNoWait(std::vector<Message> msgs) override;

  absl::StatusOr<PhysicalOffset> AppendReplicated(const ReplicaChunk& chunk) override;
  absl::StatusOr<Message> Read(PhysicalOffset physical_offset) const override {
    return log_->Read(physical_offset);
  }
  std::vector<absl::StatusOr<Message>> ReadMany(std::span<const ReadRequest> reqs) const override;
  void VisitMany(std::span<const ReadRequest> reqs,
                 const IndexedRecordVisitor& visit) const override;
  absl::StatusOr<std::optional<ConsumeQueueEntry>> GetEntry(
      const std::string& topic, int32_t queue_id, QueueOffset queue_offset) const override;
  absl::StatusOr<std::vector<Message>> ReadQueue(const std::string& topic, int32_t queue_id,
                                                 QueueOffset from_offset,
                                                 int max_count) const override;
  absl::StatusOr<size_t> VisitQueue(const std::string& topic, int32_t queue_id,
                                    QueueOffset from_offset, int max_count,
                                    const RecordVisitor& visit) const override;

  QueueOffset MinQueueOffset(const std::string& topic, int32_t queue_id) const override {
    auto cq = Find(topic, queue_id);
    return cq == nullptr ? QueueOffset(0) : std::min(cq->MinValidOffset(), cq->MaxOffset());
  }
  QueueOffset MaxQueueOffset(const std::string& topic, int32_t queue_id) const override {
    auto cq = Find(topic, queue_id);
    return cq == nullptr ? QueueOffset(0) : cq->MaxOffset();
  }

  void SetDispatchListener(DispatchListener listener) override { listener_ = std::move(listener); }

  void AddPinProvider(PinProvider pin) override { (void)AddRemovablePinProvider(std::move(pin)); }
  PinId AddRemovablePinProvider(PinProvider pin) override;
  void RemovePinProvider(PinId id) override;
  PinId AddRetentionHook(RetentionHook hook) override;
  void RemoveRetentionHook(PinId id) override;
  absl::StatusOr<int> DeleteExpired(int64_t retention_ms) override;

  absl::Status Flush() override {
    TOKIMQ_RETURN_IF_ERROR(log_->Flush());
    return Checkpoint();
  }

  CommitLog* commit_log() override { return log_.get(); }
  const FileCache* file_cache() const override { return &cq_files_; }

  absl::Status Close() override;

 private:
  std::shared_ptr<ConsumeQueue> Find(const std::string& topic, int32_t queue_id) const;
  // Caller holds put_mu_ (or is recovering).
  absl::StatusOr<std::shared_ptr<ConsumeQueue>> FindOrCreate(const std::string& topic,
                                                             int32_t queue_id);
  std::vector<std::shared_ptr<ConsumeQueue>> AllQueues() const;

  // message_store_recovery.cc
  absl::Status RecoverQueues();
  absl::Status DropSuspectTail(ConsumeQueue* cq, PhysicalOffset start);
  // Dispatches the indexed records starting in [start, limit) (limit -1: the CommitLog end);
  // returns how many. When `touched` is set it receives each record's queue and queue offset.
  absl::StatusOr<int64_t> Redispatch(
      int64_t start, int64_t limit = -1,
      std::vector<std::tuple<std::string, int32_t, QueueOffset>>* touched = nullptr);

  absl::Status Checkpoint();
  void CheckpointLoop();
  void StopCheckpointer();

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

  std::mutex checkpoint_mu_;                 // one Checkpoint at a time
  std::unique_ptr<CheckpointSync> cp_sync_;  // used under checkpoint_mu_
  // The dispatch offset the checkpoint file holds as written by this process (-1: not written
  // yet); under checkpoint_mu_. Checkpoint does not rewrite the file with the same value (a
  // temp file fsync and a directory fsync every interval on an idle store).
  int64_t stored_checkpoint_ = -1;
  std::mutex cp_mu_;
  std::condition_variable cp_cv_;
  bool stop_ = false;
  std::thread checkpointer_;
};

}  // namespace tokimq
