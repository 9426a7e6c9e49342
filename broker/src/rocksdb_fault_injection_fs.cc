#include "broker/rocksdb_fault_injection_fs.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "fmt/format.h"

namespace tokimq::broker {

// A writable file whose appends and syncs the file system tracks. While the file system is
// inactive every call fails before it reaches the base file.
class TrackedWritableFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  TrackedWritableFile(std::unique_ptr<rocksdb::FSWritableFile> base, RocksDbFaultInjectionFs* fs,
                      std::shared_ptr<RocksDbFaultInjectionFs::FileState> state)
      : FSWritableFileOwnerWrapper(std::move(base)), fs_(fs), state_(std::move(state)) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& opts,
                           rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    return Grew(target()->Append(data, opts, dbg), data.size(), std::nullopt);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& opts,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    return Grew(target()->Append(data, opts, info, dbg), data.size(), std::nullopt);
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& opts,
                                     rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    return Grew(target()->PositionedAppend(data, offset, opts, dbg), data.size(), offset);
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& opts,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    return Grew(target()->PositionedAppend(data, offset, opts, info, dbg), data.size(), offset);
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& opts,
                             rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    rocksdb::IOStatus s = target()->Truncate(size, opts, dbg);
    if (s.ok()) {
      std::lock_guard<std::mutex> l(fs_->mu_);
      state_->size = size;
      state_->synced = std::min(state_->synced, size);
    }
    return s;
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& opts, rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    return target()->Flush(opts, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& opts, rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    return Synced(target()->Sync(opts, dbg));
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& opts, rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    return Synced(target()->Fsync(opts, dbg));
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const rocksdb::IOOptions& opts,
                              rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->CheckActive(); !s.ok()) return s;
    return target()->RangeSync(offset, nbytes, opts, dbg);  // not a durability point
  }
  rocksdb::IOStatus Close(const rocksdb::IOOptions& opts, rocksdb::IODebugContext* dbg) override {
    // Closing is allowed while inactive (it writes nothing through this wrapper).
    return target()->Close(opts, dbg);
  }

 private:
  // After a successful append of `n` bytes (at `offset`, or at the end): the new size.
  rocksdb::IOStatus Grew(rocksdb::IOStatus s, uint64_t n, std::optional<uint64_t> offset) {
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> l(fs_->mu_);
    state_->size = offset ? std::max(state_->size, *offset + n) : state_->size + n;
    return s;
  }
  rocksdb::IOStatus Synced(rocksdb::IOStatus s) {
    if (s.ok()) fs_->NoteSync(state_.get());
    return s;
  }

  RocksDbFaultInjectionFs* fs_;
  std::shared_ptr<RocksDbFaultInjectionFs::FileState> state_;
};

RocksDbFaultInjectionFs::RocksDbFaultInjectionFs(std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(base) {}

void RocksDbFaultInjectionFs::SetActive(bool active) {
  std::lock_guard<std::mutex> l(mu_);
  active_ = active;
}

bool RocksDbFaultInjectionFs::active() const {
  std::lock_guard<std::mutex> l(mu_);
  return active_;
}

rocksdb::IOStatus RocksDbFaultInjectionFs::CheckActive() const {
  std::lock_guard<std::mutex> l(mu_);
  return active_ ? rocksdb::IOStatus::OK() : rocksdb::IOStatus::IOError("file system inactive");
}

void RocksDbFaultInjectionFs::NoteSync(FileState* state) {
  {
    std::lock_guard<std::mutex> l(mu_);
    state->synced = state->size;
    ++syncs_;
  }
  sync_cv_.notify_all();
}

uint64_t RocksDbFaultInjectionFs::sync_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return syncs_;
}

bool RocksDbFaultInjectionFs::WaitForSyncCount(uint64_t n,
                                               std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  return sync_cv_.wait_for(l, timeout, [&] { return syncs_ >= n; });
}

absl::Status RocksDbFaultInjectionFs::DropUnsyncedData() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [path, state] : files_) {
    if (state->size == state->synced) continue;
    if (::truncate(path.c_str(), static_cast<off_t>(state->synced)) != 0) {
      return absl::InternalError(
          fmt::format("drop unsynced data of {}: {}", path, std::strerror(errno)));
    }
    state->size = state->synced;
  }
  return absl::OkStatus();
}

rocksdb::IOStatus RocksDbFaultInjectionFs::Track(const std::string& f, uint64_t existing_size,
                                                 std::unique_ptr<rocksdb::FSWritableFile>* r) {
  auto state = std::make_shared<FileState>();
  state->size = existing_size;
  state->synced = existing_size;
  {
    std::lock_guard<std::mutex> l(mu_);
    files_[f] = state;
  }
  *r = std::make_unique<TrackedWritableFile>(std::move(*r), this, std::move(state));
  return rocksdb::IOStatus::OK();
}

rocksdb::IOStatus RocksDbFaultInjectionFs::NewWritableFile(
    const std::string& f, const rocksdb::FileOptions& opts,
    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* dbg) {
  if (auto s = CheckActive(); !s.ok()) return s;
  rocksdb::IOStatus s = target()->NewWritableFile(f, opts, r, dbg);
  if (!s.ok()) return s;
  return Track(f, 0, r);  // a new file: nothing of it is durable yet
}

rocksdb::IOStatus RocksDbFaultInjectionFs::ReopenWritableFile(
    const std::string& f, const rocksdb::FileOptions& opts,
    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* dbg) {
  if (auto s = CheckActive(); !s.ok()) return s;
  uint64_t size = 0;
  bool tracked = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(f);
    if (it != files_.end()) {
      tracked = true;
      size = it->second->synced;
    }
  }
  rocksdb::IOStatus s = target()->ReopenWritableFile(f, opts, r, dbg);
  if (!s.ok()) return s;
  if (!tracked) {
    // Not tracked: what is on disk now counts as durable.
    s = target()->GetFileSize(f, rocksdb::IOOptions(), &size, dbg);
    if (!s.ok()) return s;
  }
  return Track(f, size, r);
}

rocksdb::IOStatus RocksDbFaultInjectionFs::ReuseWritableFile(
    const std::string& f, const std::string& old_f, const rocksdb::FileOptions& opts,
    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* dbg) {
  if (auto s = CheckActive(); !s.ok()) return s;
  rocksdb::IOStatus s = target()->ReuseWritableFile(f, old_f, opts, r, dbg);
  if (!s.ok()) return s;
  {
    std::lock_guard<std::mutex> l(mu_);
    files_.erase(old_f);
  }
  return Track(f, 0, r);
}

rocksdb::IOStatus RocksDbFaultInjectionFs::RenameFile(const std::string& src,
                                                      const std::string& target_path,
                                                      const rocksdb::IOOptions& opts,
                                                      rocksdb::IODebugContext* dbg) {
  if (auto s = CheckActive(); !s.ok()) return s;
  rocksdb::IOStatus s = target()->RenameFile(src, target_path, opts, dbg);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(src);
  if (it == files_.end()) {
    files_.erase(target_path);
  } else {
    files_[target_path] = it->second;
    files_.erase(it);
  }
  return s;
}

rocksdb::IOStatus RocksDbFaultInjectionFs::DeleteFile(const std::string& f,
                                                      const rocksdb::IOOptions& opts,
                                                      rocksdb::IODebugContext* dbg) {
  if (auto s = CheckActive(); !s.ok()) return s;
  rocksdb::IOStatus s = target()->DeleteFile(f, opts, dbg);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  files_.erase(f);
  return s;
}

}  // namespace tokimq::broker
