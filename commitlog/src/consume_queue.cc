#include "commitlog/consume_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/coding.h"
#include "common/logging.h"
#include "common/status.h"

namespace tokimq {
namespace {

bool IsSegmentName(const std::string& name) {
  return name.size() == 20 &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void EncodeEntry(const ConsumeQueueEntry& e, char* p) {
  EncodeFixed64(p, static_cast<uint64_t>(e.physical_offset.value()));
  EncodeFixed32(p + 8, e.size);
  EncodeFixed64(p + 12, e.tag_hash);
}

ConsumeQueueEntry DecodeEntry(const char* p) {
  return ConsumeQueueEntry{PhysicalOffset(static_cast<int64_t>(DecodeFixed64(p))),
                           DecodeFixed32(p + 8), DecodeFixed64(p + 12)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConsumeQueue>> ConsumeQueue::Open(FileCache* cache,
                                                                 std::string dir,
                                                                 uint64_t entries_per_segment) {
  if (entries_per_segment == 0) return absl::InvalidArgumentError("entries_per_segment is 0");
  std::unique_ptr<ConsumeQueue> cq(new ConsumeQueue(cache, std::move(dir), entries_per_segment));
  TOKIMQ_RETURN_IF_ERROR(cq->Load());
  return cq;
}

absl::StatusOr<std::unique_ptr<ConsumeQueue>> ConsumeQueue::Open(FileSystem* fs, std::string dir,
                                                                 uint64_t entries_per_segment) {
  auto cache = std::make_unique<FileCache>(fs, FileCache::kDefaultCapacity);
  TOKIMQ_ASSIGN_OR_RETURN(auto cq, Open(cache.get(), std::move(dir), entries_per_segment));
  cq->own_cache_ = std::move(cache);
  return cq;
}

absl::StatusOr<std::shared_ptr<File>> ConsumeQueue::HandleLocked(const SegmentFile& f) const {
  return cache_->Open(f.path, OpenMode::kReadWrite);
}

absl::Status ConsumeQueue::RemoveFileLocked(const SegmentFile& f) {
  cache_->Forget(f.path);
  return fs_->Remove(f.path);
}

absl::Status ConsumeQueue::Load() {
  if (!fs_->Exists(dir_)) {
    TOKIMQ_RETURN_IF_ERROR(fs_->CreateDirs(dir_));
    dirty_.parents = true;  // fsynced by the next Sync (before any checkpoint covers it)
  }
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<std::string> names, cache_->ListDir(dir_));
  std::vector<std::string> segs;
  for (const auto& n : names) {
    if (IsSegmentName(n)) segs.push_back(n);
  }
  QueueOffset expected = QueueOffset::kNone();
  bool ended = false;
  for (const auto& n : segs) {
    const std::string path = dir_ + "/" + n;
    const QueueOffset first(std::stoll(n));
    if (first.value() % per_segment_ != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "consume queue file ", path, " is not aligned to ", per_segment_, " entries"));
    }
    if (ended || (expected != QueueOffset::kNone() && first != expected)) {
      // Beyond a short file or a gap: unsynced leftovers, rebuilt from the CommitLog.
      TOKIMQ_RETURN_IF_ERROR(fs_->Remove(path));
      ended = true;
      continue;
    }
    auto f = std::make_shared<SegmentFile>();
    f->first = first;
    f->path = path;
    TOKIMQ_ASSIGN_OR_RETURN(std::shared_ptr<File> file, HandleLocked(*f));
    const uint64_t size = file->Size();
    const int64_t entries = static_cast<int64_t>(size / kEntrySize);
    if (entries > per_segment_) {
      return absl::FailedPreconditionError(
          absl::StrCat("consume queue file ", path, " holds more than ", per_segment_, " entries"));
    }
    if (size % kEntrySize != 0) TOKIMQ_RETURN_IF_ERROR(file->Truncate(entries * kEntrySize));
    if (expected == QueueOffset::kNone()) min_ = first;
    expected = first + entries;
    ended = entries < per_segment_;
    files_[first] = std::move(f);
  }
  written_ = expected == QueueOffset::kNone() ? QueueOffset(0) : expected;
  min_valid_ = min_;
  return absl::OkStatus();
}

QueueOffset ConsumeQueue::MinOffset() const {
  std::lock_guard<std::mutex> l(mu_);
  return min_;
}
QueueOffset ConsumeQueue::MaxOffset() const {
  std::lock_guard<std::mutex> l(mu_);
  return written_ + static_cast<int64_t>(pending_.size());
}
QueueOffset ConsumeQueue::MinValidOffset() const {
  std::lock_guard<std::mutex> l(mu_);
  return min_valid_;
}

absl::Status ConsumeQueue::Append(const ConsumeQueueEntry& e) {
  std::lock_guard<std::mutex> l(mu_);
  pending_.push_back(e);
  if (pending_.size() >= kWriteBatch) {
    // The entry is indexed (readable) either way; a failed write is retried by the next batch
    // and reported by Sync(), and the entries are rebuilt from the CommitLog after a restart.
    absl::Status s = WriteBufferedLocked();
    if (!s.ok() && !write_error_logged_) {
      TOKIMQ_LOG_WARN("consume queue {}: deferred write failed: {}", dir_, s.ToString());
      write_error_logged_ = true;
    } else if (s.ok() && write_error_logged_) {
      TOKIMQ_LOG_INFO("consume queue {}: deferred writes succeed again", dir_);
      write_error_logged_ = false;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ConsumeQueue::SegmentFile*> ConsumeQueue::FileForLocked(QueueOffset queue_offset,
                                                                       bool create) {
  const QueueOffset first = FileFirst(queue_offset);
  auto it = files_.find(first);
  if (it != files_.end()) return it->second.get();
  if (!create) return absl::NotFoundError("no consume queue file");
  auto f = std::make_shared<SegmentFile>();
  f->first = first;
  f->path = absl::StrFormat("%s/%020d", dir_, first.value());
  TOKIMQ_RETURN_IF_ERROR(cache_->Open(f->path, OpenMode::kTruncate).status());
  if (files_.empty()) {
    min_ = first;
    // Retention may already have moved the valid minimum past `first` while every entry was
    // still buffered (no file yet): keep it.
    min_valid_ = std::max(min_valid_, first);
  }
  SegmentFile* raw = f.get();
  files_[first] = std::move(f);
  dirty_.dir = true;  // a directory change
  return raw;
}

absl::Status ConsumeQueue::WriteBufferedLocked() {
  std::string buf;
  size_t done = 0;
  absl::Status s;
  while (done < pending_.size()) {
    auto f = FileForLocked(written_, true);
    if (!f.ok()) {
      s = f.status();
      break;
    }
    const int64_t rel = written_ - (*f)->first;
    const size_t n =
        std::min<size_t>(pending_.size() - done, static_cast<size_t>(per_segment_ - rel));
    buf.resize(n * kEntrySize);
    for (size_t i = 0; i < n; ++i) EncodeEntry(pending_[done + i], buf.data() + i * kEntrySize);
    auto file = HandleLocked(**f);
    if (!file.ok()) {
      s = file.status();
      break;
    }
    s = (*file)->PWrite(static_cast<uint64_t>(rel) * kEntrySize, buf);
    if (!s.ok()) break;
    MarkFileLocked((*f)->first);
    written_ += static_cast<int64_t>(n);
    done += n;
  }
  // Entries not written stay pending (and readable); a later call retries them.
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
  return s;
}

absl::Status ConsumeQueue::WriteBuffered() {
  std::lock_guard<std::mutex> l(mu_);
  return WriteBufferedLocked();
}

void ConsumeQueue::MarkFileLocked(QueueOffset first) {
  std::vector<QueueOffset>& v = dirty_.files;
  if (v.empty() || v.back() < first) {
    v.push_back(first);
    return;
  }
  auto it = std::lower_bound(v.begin(), v.end(), first);
  if (it == v.end() || *it != first) v.insert(it, first);
}

absl::StatusOr<ConsumeQueue::Dirty> ConsumeQueue::TakeDirty() {
  std::lock_guard<std::mutex> l(mu_);
  if (!sync_failed_.ok()) return sync_failed_;
  TOKIMQ_RETURN_IF_ERROR(WriteBufferedLocked());
  Dirty taken = std::move(dirty_);
  dirty_ = Dirty();
  return taken;
}

void ConsumeQueue::ReturnDirty(const Dirty& dirty) {
  std::lock_guard<std::mutex> l(mu_);
  for (QueueOffset first : dirty.files) MarkFileLocked(first);
  dirty_.dir = dirty_.dir || dirty.dir;
  dirty_.parents = dirty_.parents || dirty.parents;
}

absl::Status ConsumeQueue::SyncDirty(const Dirty& dirty,
                                     absl::flat_hash_set<std::string>* synced_dirs) {
  // Handles taken under mu_ (a file removed meanwhile must not be reopened, i.e. recreated);
  // fsyncs outside it.
  std::vector<std::shared_ptr<File>> to_sync;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (QueueOffset first : dirty.files) {
      auto it = files_.find(first);
      if (it == files_.end()) continue;  // removed since: its directory entry is in `dir`
      // Out of descriptors: nothing synced; the caller returns the marks.
      TOKIMQ_ASSIGN_OR_RETURN(std::shared_ptr<File> file, HandleLocked(*it->second));
      to_sync.push_back(std::move(file));
    }
  }
  for (const auto& f : to_sync) {
    absl::Status s = f->Sync();
    if (!s.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      sync_failed_ = s;
      TOKIMQ_LOG_ERROR(
          "consume queue {}: fsync failed, no checkpoint will cover it until a "
          "restart rebuilds it from the CommitLog: {}",
          dir_, s.ToString());
      return s;
    }
  }
  if (dirty.dir) TOKIMQ_RETURN_IF_ERROR(cache_->SyncDir(dir_));
  if (dirty.parents) {
    for (const std::string& d : {DirName(dir_), DirName(DirName(dir_))}) {
      if (synced_dirs != nullptr && synced_dirs->contains(d)) continue;
      TOKIMQ_RETURN_IF_ERROR(cache_->SyncDir(d));
      if (synced_dirs != nullptr) synced_dirs->insert(d);
    }
  }
  return absl::OkStatus();
}

absl::Status ConsumeQueue::Sync(absl::flat_hash_set<std::string>* synced_dirs) {
  TOKIMQ_ASSIGN_OR_RETURN(Dirty dirty, TakeDirty());
  absl::Status s = SyncDirty(dirty, synced_dirs);
  if (!s.ok()) ReturnDirty(dirty);
  return s;
}

absl::StatusOr<std::vector<ConsumeQueueEntry>> ConsumeQueue::ReadLocked(QueueOffset from,
                                                                        size_t n) const {
  std::vector<ConsumeQueueEntry> out;
  out.reserve(n);
  std::string buf;
  while (out.size() < n) {
    const QueueOffset q = from + static_cast<int64_t>(out.size());
    auto it = files_.find(FileFirst(q));
    if (it == files_.end()) {
      return absl::DataLossError(
          absl::StrCat("consume queue ", dir_, " misses the file of entry ", q.value()));
    }
    const int64_t rel = q - it->first;
    const size_t cnt = std::min<size_t>(n - out.size(), static_cast<size_t>(per_segment_ - rel));
    buf.resize(cnt * kEntrySize);
    TOKIMQ_ASSIGN_OR_RETURN(std::shared_ptr<File> file, HandleLocked(*it->second));
    TOKIMQ_ASSIGN_OR_RETURN(
        size_t got, file->PRead(static_cast<uint64_t>(rel) * kEntrySize, buf.size(), buf.data()));
    if (got != buf.size()) {
      return absl::DataLossError(absl::StrCat("consume queue ", dir_, ": short read at entry ", q.value()));
    }
    for (size_t i = 0; i < cnt; ++i) out.push_back(DecodeEntry(buf.data() + i * kEntrySize));
  }
  return out;
}

absl::StatusOr<std::optional<ConsumeQueueEntry>> ConsumeQueue::Get(QueueOffset queue_offset) const {
  std::lock_guard<std::mutex> l(mu_);
  if (queue_offset >= written_ + static_cast<int64_t>(pending_.size())) return std::nullopt;
  if (queue_offset < min_) {
    return absl::NotFoundError(absl::StrCat("queue offset ", queue_offset.value(), " was deleted"));
  }
  if (queue_offset >= written_) return pending_[static_cast<size_t>(queue_offset - written_)];
  TOKIMQ_ASSIGN_OR_RETURN(auto v, ReadLocked(queue_offset, 1));
  return v[0];
}

absl::StatusOr<std::vector<ConsumeQueueEntry>> ConsumeQueue::Entries(QueueOffset from,
                                                                     size_t max_count) const {
  std::lock_guard<std::mutex> l(mu_);
  from = std::max(from, min_);
  const QueueOffset max = written_ + static_cast<int64_t>(pending_.size());
  const QueueOffset end =
      std::min(max, from + static_cast<int64_t>(std::min<size_t>(max_count, INT32_MAX)));
  std::vector<ConsumeQueueEntry> out;
  if (from >= end) return out;
  if (from < written_) {
    TOKIMQ_ASSIGN_OR_RETURN(out,
                            ReadLocked(from, static_cast<size_t>(std::min(end, written_) - from)));
  }
  for (QueueOffset q = std::max(from, written_); q < end; ++q) {
    out.push_back(pending_[static_cast<size_t>(q - written_)]);
  }
  return out;
}

absl::Status ConsumeQueue::TruncateTo(QueueOffset queue_offset) {
  std::lock_guard<std::mutex> l(mu_);
  if (queue_offset >= written_ + static_cast<int64_t>(pending_.size())) return absl::OkStatus();
  if (queue_offset >= written_) {
    pending_.resize(static_cast<size_t>(queue_offset - written_));
    return absl::OkStatus();
  }
  pending_.clear();
  const QueueOffset keep_first = FileFirst(queue_offset);
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->first > keep_first) {
      TOKIMQ_RETURN_IF_ERROR(RemoveFileLocked(*it->second));
      it = files_.erase(it);
      dirty_.dir = true;
    } else {
      if (it->first == keep_first) {
        TOKIMQ_ASSIGN_OR_RETURN(std::shared_ptr<File> file, HandleLocked(*it->second));
        TOKIMQ_RETURN_IF_ERROR(
            file->Truncate(static_cast<uint64_t>(queue_offset - keep_first) * kEntrySize));
        MarkFileLocked(it->first);
      }
      ++it;
    }
  }
  written_ = queue_offset;
  min_ = std::min(min_, queue_offset);
  min_valid_ = std::min(min_valid_, queue_offset);
  return absl::OkStatus();
}

absl::Status ConsumeQueue::StartAt(QueueOffset queue_offset) {
  std::lock_guard<std::mutex> l(mu_);
  const QueueOffset max = written_ + static_cast<int64_t>(pending_.size());
  if (min_valid_ < max || queue_offset < max) {
    return absl::FailedPreconditionError(absl::StrCat(
        "consume queue ", dir_, " cannot start at ", queue_offset.value(), ": it holds entries ",
        min_valid_.value(), "..", max.value()));
  }
  pending_.clear();
  for (const auto& entry : files_) TOKIMQ_RETURN_IF_ERROR(RemoveFileLocked(*entry.second));
  if (!files_.empty()) dirty_.dir = true;
  files_.clear();
  dirty_.files.clear();  // removed: nothing of them to fsync
  written_ = queue_offset;
  min_ = queue_offset;
  min_valid_ = queue_offset;
  return absl::OkStatus();
}

absl::Status ConsumeQueue::AdvanceMinValid(PhysicalOffset min_physical_offset) {
  std::lock_guard<std::mutex> l(mu_);
  const QueueOffset max = written_ + static_cast<int64_t>(pending_.size());
  auto phys_at = [&](QueueOffset q) -> absl::StatusOr<PhysicalOffset> {
    if (q >= written_) return pending_[static_cast<size_t>(q - written_)].physical_offset;
    TOKIMQ_ASSIGN_OR_RETURN(auto v, ReadLocked(q, 1));
    return v[0].physical_offset;
  };
  // Entries of one queue are in CommitLog order: binary search the first one still stored.
  QueueOffset lo = std::max(min_valid_, min_), hi = max;
  while (lo < hi) {
    const QueueOffset mid = lo + (hi - lo) / 2;
    TOKIMQ_ASSIGN_OR_RETURN(PhysicalOffset phys, phys_at(mid));
    if (phys < min_physical_offset) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  min_valid_ = lo;
  bool removed = false;
  while (files_.size() > 1 && files_.begin()->first + per_segment_ <= min_valid_) {
    TOKIMQ_RETURN_IF_ERROR(RemoveFileLocked(*files_.begin()->second));
    files_.erase(files_.begin());
    removed = true;
  }
  if (!files_.empty()) min_ = files_.begin()->first;
  if (removed) TOKIMQ_RETURN_IF_ERROR(cache_->SyncDir(dir_));
  return absl::OkStatus();
}

}  // namespace tokimq
