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
  // Names (not paths) of the entries of a directory, sorted, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
  // Bytes available to an unprivileged writer on the file system holding `path`.
  virtual absl::StatusOr<uint64_t> FreeSpace(const std::string& path) = 0;
  // Free bytes (as FreeSpace) and the size of that file system in bytes (one statvfs).
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
