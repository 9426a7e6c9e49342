// A narrow file abstraction (after leveldb's Env): the storage libraries take a FileSystem* so
// tests can swap in FaultInjectionFileSystem and simulate crashes, failed fsyncs and full disks.
//
// Offsets and sizes are bytes. "Appended" means handed to the OS (visible to readers of the same
// process, lost on power failure); "synced" means fdatasync returned OK (survives a crash).
//
// Thread-safety: a File may be read concurrently (PRead is const and positional) while one
// writer appends; writers must be serialised by the caller. FileSystem methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tokimq {

class File {
 public:
  virtual ~File() = default;

  // Appends at the current end of file. Errors: kResourceExhausted when the disk is full,
  // kInternal (I/O error) otherwise; on error some prefix of `data` may have been written.
  virtual absl::Status Append(std::string_view data) = 0;
  // Writes `data` at `offset` (may extend the file).
  virtual absl::Status PWrite(uint64_t offset, std::string_view data) = 0;
  // Reads up to `n` bytes at `offset` into `scratch`; returns the count read (< n only at EOF).
  virtual absl::StatusOr<size_t> PRead(uint64_t offset, size_t n, char* scratch) const = 0;
  // fdatasync. After a failed Sync the caller must treat unsynced data as lost.
  virtual absl::Status Sync() = 0;
  virtual absl::Status Truncate(uint64_t size) = 0;
  // Current size in bytes, including appended but unsynced data.
  virtual uint64_t Size() const = 0;
  virtual const std::string& path() const = 0;
  // A read-only shared mapping of the file's first `len` bytes (which may extend past the
  // current end: a file that is appended to can be mapped once for its final size), for reading
  // without a system call or a copy. nullptr when this File cannot map (the default; callers
  // then use PRead). Valid until the File is destroyed. Only bytes below Size() may be read
  // through it (past the end of the file, a read is SIGBUS). Thread-safe: the first call maps,
  // later ones return the same mapping, or nullptr if they ask for more than it covers.
  virtual const char* MapForRead(uint64_t /*len*/) const { return nullptr; }
  // Closes the file's descriptor and serves reads from its read mapping (MapForRead(len), made
  // here if needed) from then on, so a store's sealed segments cost no descriptor (issue 25:
  // one per CommitLog / TimerLog segment grew with retained data). Only for a file that is
  // complete and fsynced, and that nobody writes or truncates again: afterwards PRead reads
  // the mapping (below Size()), Sync returns OK (nothing unsynced is left), and PWrite, Append
  // and Truncate fail with kFailedPrecondition. Returns true if the descriptor is released (now
  // or before); false if this File cannot map (the default; it keeps its descriptor).
  // Thread-safe against concurrent PRead and Sync (they finish on the descriptor first).
  virtual bool ReleaseDescriptor(uint64_t /*len*/) { return false; }
};

// A descriptor held open on a directory, to make a whole file system durable with one call
// (syncfs(2)) instead of one fsync per file and directory: a checkpoint that covers tens of
// thousands of new ConsumeQueue files costs one journal commit, not ~3 fsyncs per file.
//
// Errors are reported per holder: SyncAll fails if any writeback on that file system failed
// since this syncer was opened or since its previous SyncAll (Linux >= 5.8 tracks a per-super-
// block error sequence and samples it when the descriptor is opened). So open the syncer BEFORE
// writing the files it is to cover, and keep it for as long as they are written. Such an error
// may come from any file of the file system, including other processes' files; it does not
// consume the file's own error, so an fsync of the file that failed still reports it.
//
// Thread-safety: SyncAll may be called from several threads (the kernel serialises).
class FileSystemSyncer {
 public:
  virtual ~FileSystemSyncer() = default;
  // Writes out the data and metadata (directory entries included) of every dirty file of the
  // file system and waits for it. Errors: kInternal (writeback I/O error), kResourceExhausted
  // (ENOSPC/EDQUOT reported by writeback).
  virtual absl::Status SyncAll() = 0;
};

enum class OpenMode {
  kReadOnly,        // must exist
  kReadWrite,       // created if missing, contents kept
  kTruncate,        // created if missing, emptied
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // The process-wide POSIX file system.
  static FileSystem* Default();

  virtual absl::StatusOr<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) = 0;
  // Atomic rename (POSIX rename(2)); callers SyncDir afterwards to make it durable.
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  virtual absl::Status Remove(const std::string& path) = 0;
  // mkdir -p.
  virtual absl::Status CreateDirs(const std::string& path) = 0;
  // fsync of a directory: makes creations, renames and removals in it durable.
  virtual absl::Status SyncDir(const std::string& path) = 0;
  // A syncer (above) for the file system holding directory `dir`; it keeps one descriptor open.
  // kUnimplemented where syncfs cannot report writeback errors (not Linux, or Linux < 5.8,
  // where syncfs returns 0 whatever happened): callers then fsync file by file.
  virtual absl::StatusOr<std::unique_ptr<FileSystemSyncer>> OpenSyncer(const std::string& dir) {
    return absl::UnimplementedError("no syncfs on " + dir);
  }
  // Names (not paths) of the entries of a directory, sorted, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
  // Bytes available to an unprivileged writer on the file system holding `path`.
  virtual absl::StatusOr<uint64_t> FreeSpace(const std::string& path) = 0;
  // Free bytes (as FreeSpace) and the size of that file system in bytes (one statvfs).
  // The size is what df divides by for Use%: used + available to an unprivileged writer, so
  // blocks reserved for root count as neither (free_bytes / total_bytes = 1 - df's Use%).
  struct Space {
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;  // 0: unknown
  };
  // The default asks FreeSpace and leaves the total unknown.
  virtual absl::StatusOr<Space> DiskSpace(const std::string& path) {
    absl::StatusOr<uint64_t> free = FreeSpace(path);
    if (!free.ok()) return free.status();
    return Space{*free, 0};
  }
};

// Writes `data` to `path` atomically and durably: temp file, fsync, rename, directory fsync.
absl::Status WriteFileAtomic(FileSystem* fs, const std::string& path, std::string_view data);
// Reads a whole file. kNotFound if it does not exist.
absl::StatusOr<std::string> ReadWholeFile(FileSystem* fs, const std::string& path);
// "a/b" from "a/b/c".
std::string DirName(const std::string& path);

}  // namespace tokimq
