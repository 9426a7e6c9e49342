// MessageStore: the CommitLog plus one ConsumeQueue per (topic, queue id), kept consistent.
//
// Put assigns the next queue offset of (topic, queue_id), appends the record to the CommitLog
// and dispatches it into the ConsumeQueue (dispatch is synchronous with the append and repeated
// on recovery for records the ConsumeQueues had not yet indexed). With FlushMode::kSync, Put
// returns only after the record is durable (group commit); the entry is visible to readers as
// soon as it is appended (as in RocketMQ), i.e. possibly before it is durable.
// Only records written through Put/PutBatch are indexed (they carry kFlagIndexed); records
// appended directly through commit_log() are stored but never dispatched.
// Topic names: destinations per common/names.h (a topic name, or %RETRY% / %DLQ% + a group
// name); Put/PutBatch refuse others with kInvalidArgument before writing anything. Queue ids >= 0.
//
// Layout under options.dir: commitlog/ (segments), consumequeue/<topic>/<queue id>/ (segments of
// 20-byte entries, docs/formats/consumequeue.md), checkpoint, and the clean-shutdown marker.
//
// Thread-safety: every method may be called from any thread. Put/PutBatch are serialised
// internally; reads run concurrently with appends and see only dispatched records.
//
// Retention: DeleteExpired first hands the end of the expired prefix to every retention hook
// (the timer store moves the pending messages it finds there to the CommitLog head), then
// removes CommitLog segments older than the retention age, except at or after the minimum of
// the pinned offsets (what a hook could not move yet). ConsumeQueue entries whose record is
// gone are skipped by ReadQueue, never returned. docs/operations.md "Retention".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "commitlog/commit_log.h"
#include "commitlog/message.h"
#include "commitlog/record.h"
#include "common/file_cache.h"
#include "common/offsets.h"

namespace tokimq {

struct MessageStoreOptions {
  std::string dir;
  CommitLogOptions commitlog;                        // commitlog.dir is set to <dir>/commitlog
  uint64_t consume_queue_segment_entries = 300'000;  // entries per ConsumeQueue segment file
  // How often a background thread fsyncs the ConsumeQueues and writes the dispatch checkpoint
  // (bounds the CommitLog rescan after a crash). 0 = only on Flush/Close.
  int64_t checkpoint_interval_ms = 1000;
  // How many ConsumeQueue files the store keeps open at most, over all queues (the capacity of
  // its FileCache, common/file_cache.h; RocksDB's max_open_files). 0: FileCache::kDefaultCapacity.
  // Files in use by a reader at that moment come on top. The broker sizes it from its
  // descriptor limit (docs/operations.md "File descriptors").
  size_t max_open_files = 0;
  // A checkpoint that has more than this many ConsumeQueue files and directories to make
  // durable makes them durable with one syncfs(2) of the file system instead of an fsync each
  // (commitlog/src/checkpoint_sync.h has the argument; docs/operations.md "Checkpoints").
  // SIZE_MAX: always fsync one by one. Ignored where syncfs cannot report errors (Linux < 5.8).
  size_t checkpoint_syncfs_above = 64;
};

struct PutResult {
  PhysicalOffset physical_offset = PhysicalOffset::kNone();
  QueueOffset queue_offset = QueueOffset::kNone();
  uint32_t size = 0;  // record bytes in the CommitLog
};

// One ConsumeQueue entry (20 bytes on disk).
struct ConsumeQueueEntry {
  PhysicalOffset physical_offset = PhysicalOffset::kNone();
  uint32_t size = 0;
  uint64_t tag_hash = 0;
};

// One record to read by ReadMany: its physical offset and its size in the CommitLog (as in a
// ConsumeQueue entry or a TimerLog unit).
struct ReadRequest {
  PhysicalOffset physical_offset = PhysicalOffset::kNone();
  uint32_t size = 0;
};

// The CommitLog offset below which every record of `puts` lies (the end to wait durable for):
// max(physical_offset + size); PhysicalOffset(0) for none.
PhysicalOffset DurableEnd(std::span<const PutResult> puts);

// Hash of a tag as stored in ConsumeQueue entries (0 for no tag). Stable across versions.
uint64_t TagHash(std::string_view tag);

class MessageStore {
 public:
  static absl::StatusOr<std::unique_ptr<MessageStore>> Open(FileSystem* fs, Clock* clock,
                                                            MessageStoreOptions options);
  virtual ~MessageStore() = default;

  // Appends `msg` to (msg.topic, msg.queue_id). Errors as CommitLog::Append. On success the
  // message is readable through the ConsumeQueue.
  virtual absl::StatusOr<PutResult> Put(Message msg) = 0;
  // Appends several messages atomically in order (one durability wait for all).
  virtual absl::StatusOr<std::vector<PutResult>> PutBatch(std::vector<Message> msgs) = 0;
  // PutBatch without the durability wait: returns once the records are appended and indexed.
  // Under FlushMode::kSync they may not be durable yet: the caller must not acknowledge them
  // before commit_log()->WhenDurable(DurableEnd(results)) answers OK (the broker's send path
  // does this so that its threads never block on an fsync; issue 21). Errors as PutBatch.
  // The default implementation is PutBatch.
  virtual absl::StatusOr<std::vector<PutResult>> PutBatchNoWait(std::vector<Message> msgs) {
    return PutBatch(std::move(msgs));
  }

  // Replication follower (issue 20, docs/replication.md): CommitLog::AppendChunk, then
  // dispatches the chunk's indexed records into their ConsumeQueues exactly as recovery does
  // (so a follower's queues are those of its leader) and calls the dispatch listener for each
  // queue it extended. Serialised with Put. Errors as AppendChunk; kDataLoss when a record's
  // queue offset does not continue its ConsumeQueue. Returns the new CommitLog end.
  // The default implementation returns kUnimplemented.
  virtual absl::StatusOr<PhysicalOffset> AppendReplicated(const ReplicaChunk& chunk) {
    (void)chunk;
    return absl::UnimplementedError("this store does not replicate");
  }
  // Reads by physical offset (see CommitLog::Read for errors).
  virtual absl::StatusOr<Message> Read(PhysicalOffset physical_offset) const = 0;
  // Reads several records; result i answers reqs[i] exactly as Read(reqs[i].physical_offset)
  // would (a wrong size only costs speed). The store reads records that lie close together in
  // the CommitLog with one pread. The default implementation calls Read for each.
  virtual std::vector<absl::StatusOr<Message>> ReadMany(std::span<const ReadRequest> reqs) const;
  // ReadMany without decoding Messages: calls visit(i, record view or error) once for each
  // reqs[i], in no particular order, on the calling thread; the view is valid only during that
  // call. View or error are those of ReadMany (a view holds what the Message would). For
  // callers that rebuild a record from a few of its fields. The default implementation
  // re-encodes what Read returns.
  using IndexedRecordVisitor =
      std::function<void(size_t index, const absl::StatusOr<record::RecordView>& view)>;
  virtual void VisitMany(std::span<const ReadRequest> reqs,
                         const IndexedRecordVisitor& visit) const;

  // Entry at `queue_offset`; std::nullopt if at/after MaxQueueOffset. kNotFound if below the
  // queue's minimum (deleted).
  virtual absl::StatusOr<std::optional<ConsumeQueueEntry>> GetEntry(
      const std::string& topic, int32_t queue_id, QueueOffset queue_offset) const = 0;
  // Up to `max_count` messages of the queue starting at `from_offset`, in queue order; each has
  // queue_offset set. Entries whose record was deleted by retention are skipped.
  virtual absl::StatusOr<std::vector<Message>> ReadQueue(const std::string& topic, int32_t queue_id,
                                                         QueueOffset from_offset,
                                                         int max_count) const = 0;
  // Like ReadQueue, but hands each record to `visit` as a record::RecordView pointing into an
  // internal buffer (valid only during that call) instead of building a Message: for readers
  // that need a few fields of many records. Same checks as ReadQueue (checksum, the record
  // belongs to this queue at this offset: kDataLoss otherwise), same skipping of records deleted
  // by retention. Stops at the first error `visit` returns and returns it. Returns the number of
  // records visited. The default implementation re-encodes what ReadQueue returns.
  using RecordVisitor = std::function<absl::Status(const record::RecordView&)>;
  virtual absl::StatusOr<size_t> VisitQueue(const std::string& topic, int32_t queue_id,
                                            QueueOffset from_offset, int max_count,
                                            const RecordVisitor& visit) const;
  // First stored queue offset, and the next queue offset to be assigned (0, 0 for an unknown
  // queue).
  virtual QueueOffset MinQueueOffset(const std::string& topic, int32_t queue_id) const = 0;
  virtual QueueOffset MaxQueueOffset(const std::string& topic, int32_t queue_id) const = 0;

  // Called after records are dispatched (from the putting thread, outside internal locks):
  // once per Put, and once per destination queue of a PutBatch with the last offset put there.
  // Lets long-polling receivers wake up. One listener; set before use.
  using DispatchListener =
      std::function<void(const std::string& topic, int32_t queue_id, QueueOffset queue_offset)>;
  virtual void SetDispatchListener(DispatchListener listener) = 0;

  // Offset providers: each returns the lowest CommitLog offset it still needs
  // (PhysicalOffset(INT64_MAX) for none). DeleteExpired never deletes a segment at or after the
  // minimum over all pins.
  using PinProvider = std::function<PhysicalOffset()>;
  virtual void AddPinProvider(PinProvider pin) = 0;
  // Like AddPinProvider, and returns an id for RemovePinProvider (0 if the store does not
  // support removal; the default implementation). After RemovePinProvider returns, the
  // provider is never called again, so it may refer to an object about to be destroyed.
  using PinId = uint64_t;
  virtual PinId AddRemovablePinProvider(PinProvider pin) {
    AddPinProvider(std::move(pin));
    return 0;
  }
  virtual void RemovePinProvider(PinId /*id*/) {}
  // Retention hooks: DeleteExpired calls each with `expired_end`, the end of the CommitLog's
  // expired prefix (CommitLog::ExpiredEnd), before it reads the pins, so a hook can move what
  // it still needs from below that offset to the CommitLog head and lower its pin. Called on
  // the thread of DeleteExpired, with no MessageStore lock held (a hook may Put, Read and
  // Flush), one DeleteExpired at a time. A hook's error does not stop the deletion the pins
  // allow; DeleteExpired returns the first such error after it. The timer store registers one
  // (timerstore/src/retention_mover.cc); pending half messages (transactions) would be the
  // next user. RemoveRetentionHook waits for a call in progress. Default: not supported (0).
  using RetentionHook = std::function<absl::Status(PhysicalOffset expired_end)>;
  virtual PinId AddRetentionHook(RetentionHook /*hook*/) { return 0; }
  virtual void RemoveRetentionHook(PinId /*id*/) {}
  virtual absl::StatusOr<int> DeleteExpired(int64_t retention_ms) = 0;

  virtual absl::Status Flush() = 0;
  virtual CommitLog* commit_log() = 0;
  // The cache through which the ConsumeQueue files are opened (nullptr if the store has none).
  virtual const FileCache* file_cache() const { return nullptr; }
  // Flush, persist ConsumeQueues and the checkpoint, write the clean-shutdown marker. Idempotent.
  virtual absl::Status Close() = 0;

 protected:
  // Hands `read` to visit(index, ...) as a record view (re-encoded) or as its error.
  static void VisitEncoded(const absl::StatusOr<Message>& read, size_t index,
                           const IndexedRecordVisitor& visit);
};

}  // namespace tokimq
