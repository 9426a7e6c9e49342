// Append, flush (async flusher and group commit) and close of the CommitLog. Reads live in
// commit_log_read.cc, retention in commit_log_retention.cc, recovery in commit_log_recovery.cc.
#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commit_log_impl.h"
#include "commitlog/record.h"
#include "common/coding.h"
#include "common/logging.h"
#include "common/status.h"
#include "offset_file.h"

namespace tokimq {

absl::StatusOr<std::unique_ptr<CommitLog>> CommitLog::Open(FileSystem* fs, Clock* clock,
                                                           CommitLogOptions options,
                                                           CommitLogRecoveryInfo* info) {
  TOKIMQ_ASSIGN_OR_RETURN(auto impl, CommitLogImpl::OpenImpl(fs, clock, std::move(options), info));
  return std::unique_ptr<CommitLog>(std::move(impl));
}

CommitLogImpl::CommitLogImpl(FileSystem* fs, Clock* clock, CommitLogOptions options)
    : fs_(fs), clock_(clock), opt_(std::move(options)) {
  checkpoint_path_ = opt_.dir + "/checkpoint";
  clean_marker_path_ = opt_.dir + "/clean_shutdown";
}

CommitLogImpl::~CommitLogImpl() {
  // Not a clean shutdown unless Close() was called: no flush, no marker (crash tests rely on it).
  // The group commit answers the waits still queued (a last round) before the segments go.
  group_commit_.reset();
  {
    std::lock_guard<std::mutex> l(flusher_mu_);
    stop_flusher_ = true;
  }
  flusher_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

const std::string& CommitLogImpl::SegmentPathFor(int64_t offset) const {
  static const std::string kNone = "<no segment>";
  auto seg = FindSegment(offset);
  return seg ? seg->path : kNone;
}

std::shared_ptr<Segment> CommitLogImpl::FindSegment(int64_t offset) const {
  std::shared_lock<std::shared_mutex> l(seg_mu_);
  auto it = segments_.upper_bound(offset);
  if (it == segments_.begin()) return nullptr;
  --it;
  if (offset >= it->first + segment_size()) return nullptr;
  return it->second;
}

absl::StatusOr<std::shared_ptr<Segment>> CommitLogImpl::CreateSegment(int64_t base) {
  auto seg = std::make_shared<Segment>();
  seg->base = base;
  seg->path = absl::StrFormat("%s/%020d", opt_.dir, base);
  TOKIMQ_ASSIGN_OR_RETURN(seg->file, fs_->Open(seg->path, OpenMode::kTruncate));
  {
    // In the map before the directory sync, so an append that fails after this point finds
    // the file to remove (UndoAppendLocked).
    std::unique_lock<std::shared_mutex> l(seg_mu_);
    segments_[base] = seg;
  }
  TOKIMQ_RETURN_IF_ERROR(fs_->SyncDir(opt_.dir));
  ReleaseSealedSegments();
  return seg;
}

void CommitLogImpl::ReleaseSealedSegments() {
  const int64_t flushed = flushed_.load(std::memory_order_acquire);
  std::vector<std::shared_ptr<Segment>> sealed;
  {
    std::shared_lock<std::shared_mutex> l(seg_mu_);
    if (segments_.empty()) return;
    const int64_t last = segments_.rbegin()->first;
    for (auto it = segments_.lower_bound(released_below_);
         it != segments_.end() && it->first < last && it->first + segment_size() <= flushed; ++it) {
      sealed.push_back(it->second);
    }
  }
  for (const auto& seg : sealed) {
    // A file system that cannot map keeps the descriptor (and is asked again next time).
    if (!seg->file->ReleaseDescriptor(static_cast<uint64_t>(segment_size()))) return;
    released_below_ = seg->base + segment_size();
  }
}

absl::Status CommitLogImpl::FailedStatus() const {
  std::lock_guard<std::mutex> l(fail_mu_);
  return absl::InternalError(absl::StrCat("commit log failed earlier: ", failed_.ToString()));
}

void CommitLogImpl::Fail(const absl::Status& s) {
  std::lock_guard<std::mutex> l(fail_mu_);
  if (failed_.ok()) {
    failed_ = s;
    TOKIMQ_LOG_ERROR("commit log {} failed: {}", opt_.dir, s.ToString());
  }
  has_failed_.store(true, std::memory_order_release);
}

absl::StatusOr<PhysicalOffset> CommitLogImpl::Append(Message* msg) {
  Message* one[1] = {msg};
  TOKIMQ_RETURN_IF_ERROR(AppendBatch(one));
  return msg->physical_offset;
}

absl::Status CommitLogImpl::AppendBatch(std::span<Message* const> msgs) {
  std::vector<uint32_t> sizes;
  return AppendChecked(msgs, false, &sizes);
}

absl::Status CommitLogImpl::AppendIndexed(std::span<Message* const> msgs,
                                          std::vector<uint32_t>* sizes) {
  std::vector<uint32_t> own;
  return AppendChecked(msgs, true, sizes != nullptr ? sizes : &own);
}

absl::Status CommitLogImpl::AppendChecked(std::span<Message* const> msgs, bool indexed,
                                          std::vector<uint32_t>* sizes) {
  sizes->clear();
  sizes->reserve(msgs.size());
  for (Message* m : msgs) {
    m->flags = indexed ? (m->flags | kFlagIndexed) : (m->flags & ~uint32_t{kFlagIndexed});
    if (m->body.size() > opt_.max_message_size) {
      return absl::InvalidArgumentError(absl::StrCat("message body of ", m->body.size(),
                                                     " bytes exceeds max_message_size ",
                                                     opt_.max_message_size));
    }
    if (m->topic.size() > record::kMaxTopicSize) {
      return absl::InvalidArgumentError("topic name too long");
    }
    if (!m->encoded_properties.empty() && !m->properties.empty()) {
      return absl::InvalidArgumentError("message has both properties and encoded_properties");
    }
    const size_t size = m->EncodedSize();
    if (size > opt_.segment_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("record of ", size, " bytes does not fit a segment of ", opt_.segment_size));
    }
    sizes->push_back(static_cast<uint32_t>(size));
  }
  if (msgs.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> l(write_mu_);
  if (closed_) return absl::FailedPreconditionError("commit log is closed");
  if (has_failed_.load(std::memory_order_acquire)) return FailedStatus();
  return AppendLocked(msgs, *sizes);
}

absl::Status CommitLogImpl::RollLocked(int64_t* pos) {
  const int64_t seg_end = (*pos / segment_size() + 1) * segment_size();
  const int64_t room = seg_end - *pos;
  if (room >= static_cast<int64_t>(record::kBlankSize)) {
    auto seg = FindSegment(*pos);
    if (seg == nullptr) return absl::InternalError("no segment for roll");
    char blank[record::kBlankSize];
    record::EncodeBlankTo(static_cast<uint32_t>(room), blank);
    // On failure AppendLocked decides: undo (disk full) or fail the log.
    TOKIMQ_RETURN_IF_ERROR(seg->file->PWrite(static_cast<uint64_t>(*pos - seg->base),
                                             std::string_view(blank, sizeof(blank))));
  }
  *pos = seg_end;
  return absl::OkStatus();
}

absl::Status CommitLogImpl::UndoAppendLocked(int64_t end) {
  std::vector<std::shared_ptr<Segment>> later;
  std::shared_ptr<Segment> current;
  {
    std::shared_lock<std::shared_mutex> l(seg_mu_);
    for (auto it = segments_.lower_bound(end - end % segment_size()); it != segments_.end(); ++it) {
      if (it->first < end) {
        current = it->second;
      } else {
        later.push_back(it->second);
      }
    }
  }
  // Truncated and synced (fdatasync covers the size), so a crash right after cannot bring
  // the cut bytes back as records.
  if (current != nullptr) {
    const auto keep = static_cast<uint64_t>(end - current->base);
    if (current->file->Size() > keep) {
      TOKIMQ_RETURN_IF_ERROR(current->file->Truncate(keep));
      TOKIMQ_RETURN_IF_ERROR(current->file->Sync());
    }
  }
  // Segments at or after `end` were created by the failed append: nothing valid in them.
  for (const auto& seg : later) {
    {
      std::unique_lock<std::shared_mutex> l(seg_mu_);
      segments_.erase(seg->base);
    }
    TOKIMQ_RETURN_IF_ERROR(fs_->Remove(seg->path));
  }
  if (!later.empty()) TOKIMQ_RETURN_IF_ERROR(fs_->SyncDir(opt_.dir));
  return absl::OkStatus();
}

absl::Status CommitLogImpl::OnAppendFailedLocked(const absl::Status& s, size_t records) {
  if (!absl::IsResourceExhausted(s)) {
    Fail(s);
    return s;
  }
  // ENOSPC / EDQUOT on write (not on fsync): cut the file back to the last record end, so no
  // part of a batch that was refused ever becomes visible (after a restart either), and keep
  // the log open: the next append retries. (Before, the log failed for good here and a
  // restart stored the batch's complete records although none had been acknowledged.)
  absl::Status undo = UndoAppendLocked(write_pos_);
  if (!undo.ok()) {
    Fail(undo);
    return absl::InternalError(absl::StrCat("commit log: undoing an append after ", s.message(),
                                            " failed: ", undo.message()));
  }
  if (!no_space_.exchange(true, std::memory_order_acq_rel)) {
    TOKIMQ_LOG_WARN(
        "commit log {}: no space left at offset {} ({}); appends are refused and cut back "
        "until writes succeed again",
        opt_.dir, write_pos_, s.ToString());
  }
  return absl::ResourceExhaustedError(absl::StrCat("commit log: no space left on device (",
                                                   s.message(), "); append of ", records,
                                                   " record(s) refused, nothing stored"));
}

absl::Status CommitLogImpl::AppendLocked(std::span<Message* const> msgs,
                                         std::span<const uint32_t> sizes) {
  const int64_t now = clock_->NowMs();
  const int64_t seg_size = segment_size();
  int64_t pos = write_pos_;
  int64_t run_start = pos;
  encode_buf_.clear();

  auto write_run = [&]() -> absl::Status {
    if (encode_buf_.empty()) return absl::OkStatus();
    const int64_t base = run_start - run_start % seg_size;
    auto seg = FindSegment(run_start);
    if (seg == nullptr) {
      TOKIMQ_ASSIGN_OR_RETURN(seg, CreateSegment(base));
    }
    absl::Status s = seg->file->PWrite(static_cast<uint64_t>(run_start - base), encode_buf_);
    encode_buf_.clear();
    return s;
  };

  for (size_t i = 0; i < msgs.size(); ++i) {
    Message* m = msgs[i];
    const int64_t size = sizes[i];
    const int64_t seg_end = (pos / seg_size + 1) * seg_size;
    if (pos + size > seg_end) {
      absl::Status s = write_run();
      if (s.ok()) s = RollLocked(&pos);
      if (!s.ok()) return OnAppendFailedLocked(s, msgs.size());
      run_start = pos;
    }
    m->physical_offset = PhysicalOffset(pos);
    m->store_ms = now;
    const size_t old = encode_buf_.size();
    encode_buf_.resize(old + static_cast<size_t>(size));
    record::EncodeTo(*m, static_cast<size_t>(size), encode_buf_.data() + old);
    pos += size;
  }
  if (absl::Status s = write_run(); !s.ok()) return OnAppendFailedLocked(s, msgs.size());
  write_pos_ = pos;
  max_offset_.store(pos, std::memory_order_release);
  if (no_space_.load(std::memory_order_relaxed)) {
    no_space_.store(false, std::memory_order_release);
    TOKIMQ_LOG_INFO("commit log {}: appends succeed again after running out of space", opt_.dir);
  }
  return absl::OkStatus();
}

absl::Status CommitLogImpl::SyncRange(int64_t from, int64_t to) {
  std::vector<std::shared_ptr<Segment>> segs;
  {
    std::shared_lock<std::shared_mutex> l(seg_mu_);
    auto it = segments_.upper_bound(from);
    if (it != segments_.begin()) --it;
    for (; it != segments_.end() && it->first < to; ++it) segs.push_back(it->second);
  }
  for (const auto& seg : segs) {
    TOKIMQ_RETURN_IF_ERROR(seg->file->Sync());
    segment_syncs_.fetch_add(1, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

absl::Status CommitLogImpl::SyncRound(int64_t from, int64_t to) {
  if (has_failed_.load(std::memory_order_acquire)) return FailedStatus();
  absl::Status s = SyncRange(from, to);
  if (s.ok() && to / segment_size() != checkpoint_segment_) {
    // The checkpoint only bounds the recovery scan, so it moves once per segment. Without
    // space for it the data is durable all the same: the next sync tries again.
    absl::Status c = WriteOffsetFile(fs_, checkpoint_path_, kCommitLogCheckpointMagic, to);
    if (c.ok()) {
      checkpoint_segment_ = to / segment_size();
    } else if (!absl::IsResourceExhausted(c)) {
      s = c;
    }
  }
  if (!s.ok()) {
    Fail(s);
    return s;
  }
  int64_t cur = flushed_.load(std::memory_order_acquire);
  while (to > cur && !flushed_.compare_exchange_weak(cur, to, std::memory_order_acq_rel)) {
  }
  return absl::OkStatus();
}

void CommitLogImpl::StartGroupCommit() {
  group_commit_ = std::make_unique<GroupCommit>(
      flushed_.load(std::memory_order_acquire), [this] { return MaxOffset().value(); },
      [this](int64_t from, int64_t to) { return SyncRound(from, to); }, /*start_thread=*/true);
}

absl::Status CommitLogImpl::SyncTo(int64_t target) {
  if (group_commit_ != nullptr) return group_commit_->Wait(target);
  std::unique_lock<std::mutex> l(sync_mu_);
  while (true) {
    if (has_failed_.load(std::memory_order_acquire)) return FailedStatus();
    if (flushed_.load(std::memory_order_acquire) >= target) return absl::OkStatus();
    if (sync_running_) {
      sync_cv_.wait(l);
      continue;
    }
    // Leader: one fsync covers every append that finished before it started.
    sync_running_ = true;
    const int64_t from = flushed_.load(std::memory_order_acquire);
    const int64_t to = MaxOffset().value();
    l.unlock();
    absl::Status s = SyncRound(from, to);
    l.lock();
    sync_running_ = false;
    sync_cv_.notify_all();
    if (!s.ok()) return s;
  }
}

absl::Status CommitLogImpl::WaitDurable(PhysicalOffset end_offset) {
  return SyncTo(end_offset.value());
}

void CommitLogImpl::WhenDurable(PhysicalOffset end_offset, DurableCallback done) {
  if (group_commit_ != nullptr) return group_commit_->Submit(end_offset.value(), std::move(done));
  std::move(done)(SyncTo(end_offset.value()));
}

CommitLogSyncStats CommitLogImpl::sync_stats() const {
  CommitLogSyncStats st;
  st.segment_syncs = segment_syncs_.load(std::memory_order_relaxed);
  if (group_commit_ != nullptr) {
    st.rounds = group_commit_->syncs();
    st.durable_waits = group_commit_->acknowledged();
  }
  return st;
}

absl::Status CommitLogImpl::Flush() {
  if (has_failed_.load(std::memory_order_acquire)) return FailedStatus();
  return SyncTo(MaxOffset().value());
}

void CommitLogImpl::FlusherLoop() {
  std::unique_lock<std::mutex> l(flusher_mu_);
  bool logged = false;
  while (!stop_flusher_) {
    flusher_cv_.wait_for(l, std::chrono::milliseconds(opt_.async_flush_interval_ms),
                         [&] { return stop_flusher_; });
    if (stop_flusher_) break;
    l.unlock();
    if (!has_failed_.load(std::memory_order_acquire)) {
      absl::Status s = SyncTo(MaxOffset().value());
      if (!s.ok() && !logged) {
        TOKIMQ_LOG_ERROR("commit log background flush failed: {}", s.ToString());
        logged = true;
      }
    }
    l.lock();
  }
}

absl::Status CommitLogImpl::Close() {
  {
    std::lock_guard<std::mutex> l(flusher_mu_);
    stop_flusher_ = true;
  }
  flusher_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  {
    std::lock_guard<std::mutex> l(write_mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
  }
  if (has_failed_.load(std::memory_order_acquire)) return FailedStatus();
  TOKIMQ_RETURN_IF_ERROR(Flush());
  const int64_t end = MaxOffset().value();
  TOKIMQ_RETURN_IF_ERROR(WriteOffsetFile(fs_, checkpoint_path_, kCommitLogCheckpointMagic, end));
  return WriteOffsetFile(fs_, clean_marker_path_, kCleanShutdownMagic, end);
}

}  // namespace tokimq
