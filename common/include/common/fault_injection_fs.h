// A FileSystem wrapper for crash and failure tests (after RocksDB's FaultInjectionTestFS).
//
// It forwards to a base FileSystem and remembers, per path, how many bytes were synced. Tests
// can then:
//   - SetFailSync(true): every Sync fails with kInternal ("injected fsync failure");
//   - SetNoSpace(true): every write fails with kResourceExhausted and writes nothing;
//   - TearAfterBytes(n): the write that crosses n more bytes writes only the part before the
//     boundary and fails; every later write fails too (the process "died" mid-write);
//   - NoSpaceAfterBytes(n): the disk fills up: the write that crosses n more bytes writes only
//     the part before the boundary and fails with kResourceExhausted, and so does every later
//     write (writing nothing, FreeSpace 0) until ClearFaults or SetNoSpace(false);
//   - SetFailOpen(true): every Open fails with kResourceExhausted, as open(2) does with EMFILE;
//   - SetOpenFileLimit(n): an Open fails that way while n files of this file system are open
//     (a per-process descriptor limit); open_files() counts them. Both faults fail ListDir and
//     SyncDir too (opendir and open of a directory need a descriptor);
//   - DropUnsyncedData(): power loss: every tracked file is cut back to its last synced size.
// OpenSyncer gives a syncer whose SyncAll (syncfs) counts as a sync (SetFailSync fails it) and
// marks every tracked file synced at its current size; it holds one descriptor (open_files()),
// and calls the base file system's syncer when it has one. SetFailSyncfs(true) fails SyncAll
// only (a writeback error of some other file of the file system), not File::Sync or SyncDir.
// Limits: a PWrite into an already-synced region is not reverted by DropUnsyncedData, and the
// durability of directory entries (create/rename without SyncDir) is not modelled.
//
// Thread-safe: all state sits behind one mutex.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/file.h"

namespace tokimq {

class FaultInjectionFileSystem final : public FileSystem {
 public:
  explicit FaultInjectionFileSystem(FileSystem* base = FileSystem::Default()) : base_(base) {}

  void SetFailSync(bool on);
  void SetFailSyncfs(bool on);
  void SetNoSpace(bool on);
  void TearAfterBytes(uint64_t bytes);
  void NoSpaceAfterBytes(uint64_t bytes);
  void SetFailOpen(bool on);
  // -1: no limit (the default).
  void SetOpenFileLimit(int64_t n);
  void ClearFaults();
  // Cuts every tracked file back to its synced size. Close all files of the system under test
  // first, then reopen it as after a restart.
  absl::Status DropUnsyncedData();
  // Total bytes successfully written through this file system (to pick tear points).
  uint64_t bytes_written() const;
  int sync_count() const;
  // Files opened through this file system and not yet destroyed.
  int64_t open_files() const;
  // Successful Open calls so far.
  uint64_t open_count() const;
  // SyncDir calls and successful SyncAll calls so far (each also counts in sync_count()).
  int dir_sync_count() const;
  int syncfs_count() const;

  absl::StatusOr<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override;
  absl::Status Rename(const std::string& from, const std::string& to) override;
  absl::Status Remove(const std::string& path) override;
  absl::Status CreateDirs(const std::string& path) override { return base_->CreateDirs(path); }
  absl::Status SyncDir(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<FileSystemSyncer>> OpenSyncer(const std::string& dir) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  absl::StatusOr<uint64_t> FreeSpace(const std::string& path) override;
  absl::StatusOr<Space> DiskSpace(const std::string& path) override;

 private:
  friend class FaultInjectionFile;
  friend class FaultInjectionSyncer;
  // Decides how many of `n` bytes a write may put down; returns an error status to report after
  // writing that many (OK to write all).
  absl::Status AdmitWrite(size_t n, size_t* allowed);
  absl::Status AdmitSync();
  // kResourceExhausted when an open of `path` would fail (SetFailOpen, SetOpenFileLimit).
  absl::Status AdmitOpen(const std::string& path);
  void OnSynced(const std::string& path, uint64_t size);
  void OnTruncated(const std::string& path, uint64_t size);
  void OnWritten(const std::string& path, uint64_t size);
  // kInternal when SetFailSyncfs is on, else OK (and counts the syncfs).
  absl::Status OnSyncedAll();
  void OnClosed();

  FileSystem* base_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> synced_size_;
  std::map<std::string, uint64_t> size_;  // current size of every tracked file
  int dir_sync_count_ = 0;
  int syncfs_count_ = 0;
  bool fail_sync_ = false;
  bool fail_syncfs_ = false;
  bool no_space_ = false;
  bool torn_ = false;
  int64_t tear_budget_ = -1;  // -1: no tear armed
  int64_t space_budget_ = -1;  // -1: no disk-full point armed
  uint64_t bytes_written_ = 0;
  int sync_count_ = 0;
  bool fail_open_ = false;
  int64_t open_file_limit_ = -1;
  int64_t open_files_ = 0;
  uint64_t open_count_ = 0;
};

}  // namespace tokimq
