// A RocksDB FileSystem wrapper that can simulate a power loss, for tests of the metadata and
// group-state database (after RocksDB's FaultInjectionTestFS, which Debian's librocksdb-dev
// 7.8 does not install: it lives in RocksDB's test utilities).
//
// It forwards to a base rocksdb::FileSystem and remembers, for every file it opened for
// writing, the file's size and the size at its last Sync/Fsync. Tests can then:
//   - SetActive(false): the machine is off: every later append, sync, truncate, file creation,
//     rename and deletion fails with an IOError ("file system inactive") and changes nothing,
//     so closing the database afterwards cannot make anything more durable;
//   - DropUnsyncedData(): every tracked file is cut back to its last synced size (a file never
//     synced to 0 bytes): what the page cache held and the power loss took away;
//   - SetActive(true) again, and reopen the database on the same directory.
// sync_count() counts successful Sync/Fsync calls; WaitForSyncCount blocks until it reaches a
// value (for a test that must know a background thread synced, without sleeping).
// Limits (as FaultInjectionFileSystem, common/fault_injection_fs.h): RangeSync does not count
// as a sync, directory entries (create, rename, delete without a directory fsync) are taken
// as durable, and files opened before this wrapper existed are not tracked.
//
// Use: auto fs = std::make_shared<RocksDbFaultInjectionFs>();
//      std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
//      BrokerOptions::meta_env = env.get();
// Thread-safe: the tracking state sits behind one mutex.
#pragma once

#include <rocksdb/file_system.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace tokimq::broker {

class RocksDbFaultInjectionFs final : public rocksdb::FileSystemWrapper {
 public:
  explicit RocksDbFaultInjectionFs(
      std::shared_ptr<rocksdb::FileSystem> base = rocksdb::FileSystem::Default());

  static const char* kClassName() { return "TokimqFaultInjectionFs"; }
  const char* Name() const override { return kClassName(); }

  void SetActive(bool active);
  bool active() const;
  // Cuts every tracked file back to its synced size. kInternal naming the file if one cannot
  // be truncated.
  absl::Status DropUnsyncedData();
  uint64_t sync_count() const;
  // True once sync_count() >= n; false if `timeout` of real time passed first.
  bool WaitForSyncCount(uint64_t n, std::chrono::milliseconds timeout) const;

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& opts,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& opts,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old_f,
                                      const rocksdb::FileOptions& opts,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& opts,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& f, const rocksdb::IOOptions& opts,
                               rocksdb::IODebugContext* dbg) override;

  // Tracking state of one file (shared with its open handle; the map is keyed by path).
  struct FileState {
    uint64_t size = 0;
    uint64_t synced = 0;
  };

 private:
  friend class TrackedWritableFile;
  rocksdb::IOStatus Track(const std::string& f, uint64_t existing_size,
                          std::unique_ptr<rocksdb::FSWritableFile>* r);
  rocksdb::IOStatus CheckActive() const;
  void NoteSync(FileState* state);

  mutable std::mutex mu_;
  mutable std::condition_variable sync_cv_;
  bool active_ = true;
  uint64_t syncs_ = 0;
  std::map<std::string, std::shared_ptr<FileState>> files_;
};

}  // namespace tokimq::broker
