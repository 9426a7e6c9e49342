#include "common/file_cache.h"

#include <algorithm>

namespace tokimq {

FileCache::FileCache(FileSystem* fs, size_t capacity)
    : fs_(fs), capacity_(capacity == 0 ? kDefaultCapacity : capacity) {}

absl::StatusOr<std::shared_ptr<File>> FileCache::Open(const std::string& path, OpenMode mode) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (mode != OpenMode::kTruncate) {
      auto it = files_.find(path);
      if (it != files_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        ++stats_.hits;
        return it->second.file;
      }
    }
  }
  absl::StatusOr<std::unique_ptr<File>> opened = fs_->Open(path, mode);
  if (!opened.ok() && absl::IsResourceExhausted(opened.status()) && ReleaseForRetry()) {
    opened = fs_->Open(path, mode);  // out of descriptors (or memory): some of ours went back
  }
  std::lock_guard<std::mutex> l(mu_);
  if (!opened.ok()) {
    ++stats_.open_failures;
    return opened.status();
  }
  ++stats_.opens;
  std::shared_ptr<File> file(std::move(*opened));
  if (mode != OpenMode::kTruncate) {
    // Another thread may have opened the same file meanwhile: keep one handle.
    auto it = files_.find(path);
    if (it != files_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.file;
    }
  }
  InsertLocked(path, file);
  return file;
}

void FileCache::Forget(const std::string& path) {
  std::shared_ptr<File> closing;  // closed after the lock is released
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return;
  closing = std::move(it->second.file);
  lru_.erase(it->second.lru);
  files_.erase(it);
}

bool FileCache::ReleaseForRetry() {
  std::lock_guard<std::mutex> l(mu_);
  return ReleaseIdleLocked(std::max<size_t>(1, files_.size() / 4)) > 0;
}

absl::StatusOr<std::vector<std::string>> FileCache::ListDir(const std::string& path) {
  absl::StatusOr<std::vector<std::string>> names = fs_->ListDir(path);
  if (!names.ok() && absl::IsResourceExhausted(names.status()) && ReleaseForRetry()) {
    names = fs_->ListDir(path);
  }
  return names;
}

absl::Status FileCache::SyncDir(const std::string& path) {
  absl::Status s = fs_->SyncDir(path);
  if (absl::IsResourceExhausted(s) && ReleaseForRetry()) s = fs_->SyncDir(path);
  return s;
}

FileCache::Stats FileCache::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  Stats s = stats_;
  s.cached = files_.size();
  return s;
}

void FileCache::InsertLocked(const std::string& path, std::shared_ptr<File> file) {
  auto it = files_.find(path);
  if (it != files_.end()) {
    it->second.file = std::move(file);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  } else {
    lru_.push_front(path);
    files_.emplace(path, Entry{std::move(file), lru_.begin()});
  }
  EvictLocked(capacity_);
}

void FileCache::EvictLocked(size_t target) {
  while (files_.size() > target) {
    auto it = files_.find(lru_.back());
    lru_.pop_back();
    files_.erase(it);  // a holder keeps its handle (and descriptor) until it lets go
    ++stats_.evictions;
  }
}

size_t FileCache::ReleaseIdleLocked(size_t n) {
  size_t released = 0;
  for (auto lit = lru_.end(); lit != lru_.begin() && released < n;) {
    --lit;
    auto it = files_.find(*lit);
    if (it->second.file.use_count() > 1) continue;  // held by a reader: closing frees nothing
    files_.erase(it);
    lit = lru_.erase(lit);
    ++released;
    ++stats_.evictions;
  }
  return released;
}

}  // namespace tokimq
