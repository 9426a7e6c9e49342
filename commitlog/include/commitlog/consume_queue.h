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
  int64_t MinOffset() const;
  // Next queue offset to be assigned.
  int64_t MaxOffset() const;
  // First entry whose record is still in the CommitLog (see AdvanceMinValid).
  int64_t MinValidOffset() const;

  // Appends the entry for queue offset MaxOffset(). May write a batch to disk; a failed batch
  // write is logged and retried later (Sync reports it), so this only fails on bad input.
  absl::Status Append(const ConsumeQueueEntry& e);
  // Entry at `queue_offset`, nullopt at/after MaxOffset, kNotFound below MinOffset.
  absl::StatusOr<std::optional<ConsumeQueueEntry>> Get(int64_t queue_offset) const;
  // Up to `max_count` entries from `from` (clamped to [MinOffset, MaxOffset)).
  absl::StatusOr<std::vector<ConsumeQueueEntry>> Entries(int64_t from, size_t max_count) const;

  // Writes buffered entries to the files (no fsync).
  absl::Status WriteBuffered();
  // WriteBuffered, then fsyncs the files written since the last Sync, and, the first time
  // after the queue's directory was created, the directories above it (topic and root) so the
  // queue is found after a crash. Directories named in `synced_dirs` are taken as synced
  // already, and those it syncs are added (one checkpoint syncs a topic directory once, not
  // once per queue). Creating a queue does not fsync directories itself: that cost two
  // directory fsyncs per new queue on the put path (issue 25, 16,000 new queues took ~40 s
  // to receive their first message).
  absl::Status Sync(absl::flat_hash_set<std::string>* synced_dirs = nullptr);
  // Drops every entry at or after `queue_offset`.
  absl::Status TruncateTo(int64_t queue_offset);
  // Moves MinValidOffset to the first entry with physical offset >= min_physical_offset and
  // deletes whole files (never the last one) whose entries all lie below it.
  absl::Status AdvanceMinValid(int64_t min_physical_offset);

  const std::string& dir() const { return dir_; }

 private:
  struct SegmentFile {
    int64_t first = 0;  // queue offset of its first entry
    std::string path;   // opened through cache_ when used
  };
  ConsumeQueue(FileCache* cache, std::string dir, uint64_t per_segment)
      : cache_(cache),
        fs_(cache->fs()),
        dir_(std::move(dir)),
        per_segment_(static_cast<int64_t>(per_segment)) {}
  absl::Status Load();
  absl::StatusOr<std::vector<ConsumeQueueEntry>> ReadLocked(int64_t from, size_t n) const;
  absl::StatusOr<SegmentFile*> FileForLocked(int64_t queue_offset, bool create);
  // A handle to an existing segment file (reopened through the cache if it was evicted).
  absl::StatusOr<std::shared_ptr<File>> HandleLocked(const SegmentFile& f) const;
  // Removes a segment file (and its cached handle).
  absl::Status RemoveFileLocked(const SegmentFile& f);
  absl::Status WriteBufferedLocked();

  std::unique_ptr<FileCache> own_cache_;  // set by Open(FileSystem*, ...) only
  FileCache* cache_;
  FileSystem* fs_;
  const std::string dir_;
  const int64_t per_segment_;
  mutable std::mutex mu_;
  std::map<int64_t, std::shared_ptr<SegmentFile>> files_;  // guarded by mu_
  int64_t min_ = 0;                                        // guarded by mu_
  int64_t min_valid_ = 0;                                  // guarded by mu_
  int64_t written_ = 0;                     // entries below this are in files; guarded by mu_
  std::vector<ConsumeQueueEntry> pending_;  // entries [written_, written_ + size); mu_
  std::vector<int64_t> dirty_;              // files written since the last Sync; mu_
  bool write_error_logged_ = false;         // mu_
  bool parents_unsynced_ = false;  // dir_ created, parents not yet fsynced; mu_
};

}  // namespace tokimq
