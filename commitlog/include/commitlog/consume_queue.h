// ConsumeQueue: the index of one (topic, queue id): entry i (the queue offset) says where the
// i-th message of the queue lies in the CommitLog. Grammar: docs/formats/consumequeue.md.
//
// Files: <dir>/<20-digit first queue offset>, each holding up to entries_per_segment entries of
// 20 bytes (physical offset u64, size u32, tag hash u64, little-endian). No header and no
// per-entry CRC (the width is fixed by the format); entries are cross-checked against the
// CommitLog record they point to, which carries the topic, queue id and queue offset.
//
// Appended entries are buffered in memory and written with one pwrite per batch
// (WriteBuffered, or automatically once kWriteBatch entries are pending). They are rebuilt from
// the CommitLog after a crash, so they are fsynced only by Sync() (MessageStore checkpoints).
//
// Descriptors: the queue keeps the paths of its files, not open files; it takes a handle from a
// FileCache (common/file_cache.h) for each read, write, sync or truncate, so the descriptors
// of all queues together are bounded by the cache's capacity (issue 25: one open file per
// queue ran a broker with thousands of topics out of descriptors). A failed open (kResource-
// Exhausted when out of descriptors) fails that call only; the next call opens again.
//
// Thread-safety: one appender (MessageStore serialises Put); Get/Entries/Min/Max from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "commitlog/message_store.h"
#include "common/file.h"
#include "common/file_cache.h"
#include "common/offsets.h"

namespace tokimq {

class ConsumeQueue {
 public:
  static constexpr size_t kEntrySize = 20;
  static constexpr size_t kWriteBatch = 256;

  // Opens (creating `dir` if needed) and loads the segment list. A trailing partial entry and
  // files after a short (not full) file are dropped: they are rebuilt from the CommitLog.
  // Its files are opened through `cache` (shared by many queues; must outlive the queue).
  static absl::StatusOr<std::unique_ptr<ConsumeQueue>> Open(FileCache* cache, std::string dir,
                                                            uint64_t entries_per_segment);
  // The same with a cache of its own (FileCache::kDefaultCapacity files) over `fs`.
  static absl::StatusOr<std::unique_ptr<ConsumeQueue>> Open(FileSystem* fs, std::string dir,
                                                            uint64_t entries_per_segment);

  // First stored queue offset (files deleted by retention are gone).
  QueueOffset MinOffset() const;
  // Next queue offset to be assigned.
  QueueOffset MaxOffset() const;
  // First entry whose record is still in the CommitLog (see AdvanceMinValid).
  QueueOffset MinValidOffset() const;

  // Appends the entry for queue offset MaxOffset(). May write a batch to disk; a failed batch
  // write is logged and retried later (Sync reports it), so this only fails on bad input.
  absl::Status Append(const ConsumeQueueEntry& e);
  // Entry at `queue_offset`, nullopt at/after MaxOffset, kNotFound below MinOffset.
  absl::StatusOr<std::optional<ConsumeQueueEntry>> Get(QueueOffset queue_offset) const;
  // Up to `max_count` entries from `from` (clamped to [MinOffset, MaxOffset)).
  absl::StatusOr<std::vector<ConsumeQueueEntry>> Entries(QueueOffset from,
                                                         size_t max_count) const;

  // Writes buffered entries to the files (no fsync).
  absl::Status WriteBuffered();
  // What a queue has changed on disk since it was last made durable: the files written, whether
  // files were created or removed in its directory, and whether its directory itself is new
  // (then its topic directory and the consumequeue root must be fsynced for it to be found).
  struct Dirty {
    std::vector<QueueOffset> files;  // first queue offsets of the files written (ascending)
    bool dir = false;                // entries created or removed in dir()
    bool parents = false;            // dir() was created: its parent and grandparent are unsynced
    bool empty() const { return files.empty() && !dir && !parents; }
    // The fsyncs SyncDirty would make at most (file, directory and parent syncs).
    size_t items() const { return files.size() + (dir ? 1 : 0) + (parents ? 2 : 0); }
  };
  // Making queues durable, in three steps (Sync does all three for one queue; MessageStore's
  // checkpoint takes the Dirty of every queue first, then makes all of them durable with one
  // syncfs where there are many, see message_store.h):
  //  1. TakeDirty: WriteBuffered, then takes (and clears) the queue's marks. Changes made after
  //     it mark the queue again, so a later checkpoint covers them.
  //  2. SyncDirty (fsync each file and directory named, through the cache) or a syncfs of the
  //     whole file system.
  //  3. If step 2 failed: ReturnDirty puts the marks back, so nothing is taken as durable.
  // A failed fsync of one of the queue's files (not a failed open) fails the queue's syncs for
  // good (after a failed fsync Linux may have dropped the dirty pages, so a retry
  // that succeeds proves nothing): TakeDirty and Sync return that error from then on, and the
  // store writes no checkpoint that would claim the lost entries; a restart rebuilds them from
  // the CommitLog. Errors: those of WriteBuffered, of the cache's Open/SyncDir, of File::Sync.
  absl::StatusOr<Dirty> TakeDirty();
  // Fsyncs what `dirty` names. Directories in `synced_dirs` are taken as synced already, and
  // those it syncs are added (one checkpoint syncs a topic directory once, not once per queue).
  absl::Status SyncDirty(const Dirty& dirty, absl::flat_hash_set<std::string>* synced_dirs);
  void ReturnDirty(const Dirty& dirty);
  // TakeDirty + SyncDirty (+ ReturnDirty on failure). Creating a queue does not fsync
  // directories itself: that cost two directory fsyncs per new queue on the put path
  // (issue 25, 16,000 new queues took ~40 s to receive their first message).
  absl::Status Sync(absl::flat_hash_set<std::string>* synced_dirs = nullptr);
  // Drops every entry at or after `queue_offset`.
  absl::Status TruncateTo(QueueOffset queue_offset);
  // A queue with no valid entry (MinValidOffset() >= MaxOffset()) continues at `queue_offset`
  // (>= MaxOffset()): its files are removed and the next Append is entry `queue_offset`; the
  // entries before it in its file are zero (a hole) and never valid. For a CommitLog copied
  // from the middle of a leader's (docs/replication.md "A follower behind the leader's
  // retention"), whose records carry the leader's queue offsets. kFailedPrecondition when the
  // queue holds a valid entry or `queue_offset` is below MaxOffset().
  absl::Status StartAt(QueueOffset queue_offset);
  // Moves MinValidOffset to the first entry with physical offset >= min_physical_offset and
  // deletes whole files (never the last one) whose entries all lie below it.
  absl::Status AdvanceMinValid(PhysicalOffset min_physical_offset);

  const std::string& dir() const { return dir_; }

 private:
  struct SegmentFile {
    QueueOffset first;  // queue offset of its first entry
    std::string path;   // opened through cache_ when used
  };
  ConsumeQueue(FileCache* cache, std::string dir, uint64_t per_segment)
      : cache_(cache),
        fs_(cache->fs()),
        dir_(std::move(dir)),
        per_segment_(static_cast<int64_t>(per_segment)) {}
  absl::Status Load();
  absl::StatusOr<std::vector<ConsumeQueueEntry>> ReadLocked(QueueOffset from, size_t n) const;
  absl::StatusOr<SegmentFile*> FileForLocked(QueueOffset queue_offset, bool create);
  // A handle to an existing segment file (reopened through the cache if it was evicted).
  absl::StatusOr<std::shared_ptr<File>> HandleLocked(const SegmentFile& f) const;
  // Removes a segment file (and its cached handle).
  absl::Status RemoveFileLocked(const SegmentFile& f);
  absl::Status WriteBufferedLocked();
  // Marks the file starting at `first` written (dirty_.files stays sorted and unique).
  void MarkFileLocked(QueueOffset first);
  // Queue offset of the first entry of the file that holds `queue_offset`.
  QueueOffset FileFirst(QueueOffset queue_offset) const {
    return queue_offset - queue_offset.value() % per_segment_;
  }

  std::unique_ptr<FileCache> own_cache_;  // set by Open(FileSystem*, ...) only
  FileCache* cache_;
  FileSystem* fs_;
  const std::string dir_;
  const int64_t per_segment_;
  mutable std::mutex mu_;
  std::map<QueueOffset, std::shared_ptr<SegmentFile>> files_;  // guarded by mu_
  QueueOffset min_;                                            // guarded by mu_
  QueueOffset min_valid_;                                      // guarded by mu_
  QueueOffset written_;                     // entries below this are in files; guarded by mu_
  std::vector<ConsumeQueueEntry> pending_;  // entries [written_, written_ + size); mu_
  Dirty dirty_;                             // changed since the last TakeDirty; mu_
  absl::Status sync_failed_;                // a failed fsync, for good; mu_
  bool write_error_logged_ = false;         // mu_
};

}  // namespace tokimq
