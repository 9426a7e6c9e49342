// FileCache: a bounded LRU of open Files, so the number of descriptors a store holds is set by
// configuration, not by how many files it has (after RocksDB's table cache and its
// max_open_files; RocketMQ maps ConsumeQueue files and closes them for the same reason).
//
// Owners (ConsumeQueue segment files) keep a path, not a File, and ask the cache for a handle
// each time they read, write, sync or truncate. A handle is a shared_ptr: when the cache evicts
// a file that a reader still holds, only the cache's reference goes; the descriptor closes when
// the last holder lets go. So at most `capacity` idle files are open, plus the ones held at that
// moment (bounded by the threads doing I/O). Data written through one handle is visible through
// the next one (same inode); Sync on a reopened handle makes it durable (fsync works per inode).
//
// Open errors are those of FileSystem::Open: kResourceExhausted when the process or the system
// is out of descriptors or memory (EMFILE, ENFILE, ENOMEM). On that error the cache first closes
// up to a quarter of its idle files and tries once more, so it gives descriptors back to the
// rest of the process (connections, segment rolls) under pressure; if the retry fails too, the
// caller gets kResourceExhausted and a later call (after descriptors return) succeeds.
//
// ListDir and SyncDir go through the cache for the same reason: opendir and the open of a
// directory for fsync need a descriptor too, so on kResourceExhausted they release idle files
// the same way and try once more (the issue 25 wedge began with `opendir .../consumequeue/t50/6:
// Too many open files`).
//
// Lifetime: outlives every owner that uses it. Thread-safety: all methods, from any thread; the
// open system call runs outside the cache's lock.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file.h"

namespace tokimq {

class FileCache {
 public:
  // Capacity used when a caller passes 0 (embedded stores and tests that do not size it).
  static constexpr size_t kDefaultCapacity = 1024;

  struct Stats {
    uint64_t hits = 0;           // Open answered from the cache
    uint64_t opens = 0;          // files opened (misses and kTruncate)
    uint64_t evictions = 0;      // cache references dropped to stay within capacity
    uint64_t open_failures = 0;  // Open calls answered with an error
    size_t cached = 0;           // files the cache holds now (<= capacity)
  };

  // `capacity` 0 means kDefaultCapacity. `fs` must outlive the cache.
  FileCache(FileSystem* fs, size_t capacity);
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  // A handle to `path`. A cached handle is returned as is (whatever mode opened it); otherwise
  // the file is opened with `mode` and cached. kTruncate always opens (and empties) the file
  // anew and replaces a cached handle. Errors: those of FileSystem::Open.
  absl::StatusOr<std::shared_ptr<File>> Open(const std::string& path, OpenMode mode);
  // Drops the cached handle of `path`, if any (before removing or renaming the file).
  void Forget(const std::string& path);
  // FileSystem::ListDir / SyncDir of fs(), retried once after releasing idle files when they
  // fail with kResourceExhausted. Errors: those of the file system (kResourceExhausted when the
  // retry fails too).
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path);
  absl::Status SyncDir(const std::string& path);

  size_t capacity() const { return capacity_; }
  FileSystem* fs() const { return fs_; }
  Stats stats() const;

 private:
  struct Entry {
    std::shared_ptr<File> file;
    std::list<std::string>::iterator lru;  // position in lru_ (front = most recent)
  };
  // Inserts or replaces `path` as most recent, then evicts down to capacity_.
  void InsertLocked(const std::string& path, std::shared_ptr<File> file);
  void EvictLocked(size_t target);
  // Drops up to `n` cached files that nobody else holds, least recent first.
  size_t ReleaseIdleLocked(size_t n);
  // After an operation failed with kResourceExhausted: releases a quarter of the idle files (at
  // least one) and says whether any went, i.e. whether a retry may succeed.
  bool ReleaseForRetry();

  FileSystem* const fs_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;                     // guarded by mu_
  std::unordered_map<std::string, Entry> files_;  // guarded by mu_
  Stats stats_;                                    // guarded by mu_ (cached: files_.size())
};

}  // namespace tokimq
