#include "common/fault_injection_fs.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tokimq {

class FaultInjectionFile final : public File {
 public:
  FaultInjectionFile(FaultInjectionFileSystem* fs, std::unique_ptr<File> base)
      : fs_(fs), base_(std::move(base)) {}
  ~FaultInjectionFile() override { fs_->OnClosed(); }

  absl::Status Append(std::string_view data) override { return PWrite(base_->Size(), data); }

  absl::Status PWrite(uint64_t offset, std::string_view data) override {
    size_t allowed = 0;
    absl::Status st = fs_->AdmitWrite(data.size(), &allowed);
    if (allowed > 0) {
      absl::Status w = base_->PWrite(offset, data.substr(0, allowed));
      fs_->OnWritten(base_->path(), base_->Size());
      TOKIMQ_RETURN_IF_ERROR(w);
    }
    return st;
  }
  absl::StatusOr<size_t> PRead(uint64_t offset, size_t n, char* scratch) const override {
    return base_->PRead(offset, n, scratch);
  }
  absl::Status Sync() override {
    TOKIMQ_RETURN_IF_ERROR(fs_->AdmitSync());
    TOKIMQ_RETURN_IF_ERROR(base_->Sync());
    fs_->OnSynced(base_->path(), base_->Size());
    return absl::OkStatus();
  }
  absl::Status Truncate(uint64_t size) override {
    TOKIMQ_RETURN_IF_ERROR(base_->Truncate(size));
    fs_->OnTruncated(base_->path(), size);
    return absl::OkStatus();
  }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionFileSystem* fs_;
  std::unique_ptr<File> base_;
};

class FaultInjectionSyncer final : public FileSystemSyncer {
 public:
  FaultInjectionSyncer(FaultInjectionFileSystem* fs, std::unique_ptr<FileSystemSyncer> base)
      : fs_(fs), base_(std::move(base)) {}
  ~FaultInjectionSyncer() override { fs_->OnClosed(); }
  absl::Status SyncAll() override {
    TOKIMQ_RETURN_IF_ERROR(fs_->AdmitSync());
    if (base_ != nullptr) TOKIMQ_RETURN_IF_ERROR(base_->SyncAll());
    return fs_->OnSyncedAll();
  }

 private:
  FaultInjectionFileSystem* fs_;
  std::unique_ptr<FileSystemSyncer> base_;  // nullptr where the base has none
};

void FaultInjectionFileSystem::SetFailSync(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  fail_sync_ = on;
}
void FaultInjectionFileSystem::SetFailSyncfs(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  fail_syncfs_ = on;
}
void FaultInjectionFileSystem::SetNoSpace(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  no_space_ = on;
  if (!on) space_budget_ = -1;
}
void FaultInjectionFileSystem::TearAfterBytes(uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  tear_budget_ = static_cast<int64_t>(bytes);
  torn_ = false;
}
void FaultInjectionFileSystem::NoSpaceAfterBytes(uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  space_budget_ = static_cast<int64_t>(bytes);
}
void FaultInjectionFileSystem::SetFailOpen(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  fail_open_ = on;
}
void FaultInjectionFileSystem::SetOpenFileLimit(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  open_file_limit_ = n;
}
void FaultInjectionFileSystem::ClearFaults() {
  std::lock_guard<std::mutex> l(mu_);
  fail_sync_ = fail_syncfs_ = no_space_ = torn_ = fail_open_ = false;
  tear_budget_ = space_budget_ = -1;
  open_file_limit_ = -1;
}
int64_t FaultInjectionFileSystem::open_files() const {
  std::lock_guard<std::mutex> l(mu_);
  return open_files_;
}
uint64_t FaultInjectionFileSystem::open_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return open_count_;
}
void FaultInjectionFileSystem::OnClosed() {
  std::lock_guard<std::mutex> l(mu_);
  --open_files_;
}
uint64_t FaultInjectionFileSystem::bytes_written() const {
  std::lock_guard<std::mutex> l(mu_);
  return bytes_written_;
}
int FaultInjectionFileSystem::sync_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return sync_count_;
}
int FaultInjectionFileSystem::dir_sync_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return dir_sync_count_;
}
int FaultInjectionFileSystem::syncfs_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return syncfs_count_;
}

absl::Status FaultInjectionFileSystem::AdmitWrite(size_t n, size_t* allowed) {
  std::lock_guard<std::mutex> l(mu_);
  *allowed = 0;
  if (torn_) return absl::InternalError("injected failure: write after torn write");
  if (no_space_) return absl::ResourceExhaustedError("injected failure: no space left on device");
  if (space_budget_ >= 0 && static_cast<uint64_t>(space_budget_) < n) {
    *allowed = static_cast<size_t>(space_budget_);
    bytes_written_ += *allowed;
    space_budget_ = -1;
    no_space_ = true;
    return absl::ResourceExhaustedError("injected failure: no space left on device");
  }
  if (space_budget_ >= 0) space_budget_ -= static_cast<int64_t>(n);
  if (tear_budget_ >= 0 && static_cast<uint64_t>(tear_budget_) < n) {
    *allowed = static_cast<size_t>(tear_budget_);
    bytes_written_ += *allowed;
    tear_budget_ = -1;
    torn_ = true;
    return absl::InternalError("injected failure: torn write");
  }
  if (tear_budget_ >= 0) tear_budget_ -= static_cast<int64_t>(n);
  *allowed = n;
  bytes_written_ += n;
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::AdmitSync() {
  std::lock_guard<std::mutex> l(mu_);
  if (fail_sync_ || torn_) return absl::InternalError("injected failure: fsync failed");
  ++sync_count_;
  return absl::OkStatus();
}

void FaultInjectionFileSystem::OnSynced(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  synced_size_[path] = size;
}

void FaultInjectionFileSystem::OnWritten(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  size_[path] = size;
}

absl::Status FaultInjectionFileSystem::OnSyncedAll() {
  std::lock_guard<std::mutex> l(mu_);
  if (fail_syncfs_) return absl::InternalError("injected failure: syncfs: Input/output error");
  ++syncfs_count_;
  for (const auto& [path, size] : size_) synced_size_[path] = size;
  return absl::OkStatus();
}

void FaultInjectionFileSystem::OnTruncated(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  size_[path] = size;
  auto it = synced_size_.find(path);
  if (it != synced_size_.end() && it->second > size) it->second = size;
}

absl::StatusOr<std::unique_ptr<File>> FaultInjectionFileSystem::Open(const std::string& path,
                                                                      OpenMode mode) {
  TOKIMQ_RETURN_IF_ERROR(AdmitOpen(path));
  bool existed = base_->Exists(path);
  TOKIMQ_ASSIGN_OR_RETURN(auto f, base_->Open(path, mode));
  {
    std::lock_guard<std::mutex> l(mu_);
    ++open_files_;
    ++open_count_;
    size_[path] = f->Size();
    if (mode == OpenMode::kTruncate || !existed) {
      synced_size_[path] = 0;
    } else if (!synced_size_.count(path)) {
      synced_size_[path] = f->Size();  // data present before we started tracking is durable
    }
  }
  return std::unique_ptr<File>(new FaultInjectionFile(this, std::move(f)));
}

absl::Status FaultInjectionFileSystem::Rename(const std::string& from, const std::string& to) {
  TOKIMQ_RETURN_IF_ERROR(base_->Rename(from, to));
  std::lock_guard<std::mutex> l(mu_);
  auto it = synced_size_.find(from);
  if (it != synced_size_.end()) {
    synced_size_[to] = it->second;
    synced_size_.erase(from);
  }
  auto sz = size_.find(from);
  if (sz != size_.end()) {
    size_[to] = sz->second;
    size_.erase(from);
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::Remove(const std::string& path) {
  TOKIMQ_RETURN_IF_ERROR(base_->Remove(path));
  std::lock_guard<std::mutex> l(mu_);
  synced_size_.erase(path);
  size_.erase(path);
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::AdmitOpen(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  if (fail_open_ || (open_file_limit_ >= 0 && open_files_ >= open_file_limit_)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("injected failure: open ", path, ": Too many open files"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FaultInjectionFileSystem::ListDir(
    const std::string& path) {
  TOKIMQ_RETURN_IF_ERROR(AdmitOpen(path));
  return base_->ListDir(path);
}

absl::Status FaultInjectionFileSystem::SyncDir(const std::string& path) {
  TOKIMQ_RETURN_IF_ERROR(AdmitOpen(path));
  TOKIMQ_RETURN_IF_ERROR(AdmitSync());
  {
    std::lock_guard<std::mutex> l(mu_);
    ++dir_sync_count_;
  }
  return base_->SyncDir(path);
}

absl::StatusOr<std::unique_ptr<FileSystemSyncer>> FaultInjectionFileSystem::OpenSyncer(
    const std::string& dir) {
  TOKIMQ_RETURN_IF_ERROR(AdmitOpen(dir));
  std::unique_ptr<FileSystemSyncer> base;
  absl::StatusOr<std::unique_ptr<FileSystemSyncer>> b = base_->OpenSyncer(dir);
  if (b.ok()) {
    base = std::move(*b);
  } else if (!absl::IsUnimplemented(b.status())) {
    return b.status();
  }
  std::lock_guard<std::mutex> l(mu_);
  ++open_files_;
  ++open_count_;
  return std::unique_ptr<FileSystemSyncer>(new FaultInjectionSyncer(this, std::move(base)));
}

absl::StatusOr<uint64_t> FaultInjectionFileSystem::FreeSpace(const std::string& path) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (no_space_) return 0;
  }
  return base_->FreeSpace(path);
}

absl::StatusOr<FileSystem::Space> FaultInjectionFileSystem::DiskSpace(const std::string& path) {
  TOKIMQ_ASSIGN_OR_RETURN(Space s, base_->DiskSpace(path));
  std::lock_guard<std::mutex> l(mu_);
  if (no_space_) s.free_bytes = 0;
  return s;
}

absl::Status FaultInjectionFileSystem::DropUnsyncedData() {
  std::map<std::string, uint64_t> snapshot;
  {
    std::lock_guard<std::mutex> l(mu_);
    snapshot = synced_size_;
    for (const auto& [path, size] : snapshot) {
      auto it = size_.find(path);
      if (it != size_.end() && it->second > size) it->second = size;
    }
    fail_sync_ = no_space_ = torn_ = false;
    tear_budget_ = space_budget_ = -1;
  }
  for (const auto& [path, size] : snapshot) {
    if (!base_->Exists(path)) continue;
    TOKIMQ_ASSIGN_OR_RETURN(auto f, base_->Open(path, OpenMode::kReadWrite));
    if (f->Size() > size) TOKIMQ_RETURN_IF_ERROR(f->Truncate(size));
  }
  return absl::OkStatus();
}

}  // namespace tokimq
