// CommitLog::Open: segment discovery, clean-shutdown fast path, and the recovery scan that
// truncates a torn tail and refuses a corrupt middle.
#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "commit_log_impl.h"
#include "commitlog/record.h"
#include "common/coding.h"
#include "common/logging.h"
#include "common/status.h"
#include "offset_file.h"

namespace tokimq {
namespace {

constexpr size_t kScanChunk = 1 << 20;

bool IsSegmentName(const std::string& name) {
  return name.size() == 20 &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Sequential window over a segment file for the recovery scans.
class SegmentReader {
 public:
  explicit SegmentReader(const Segment& seg) : seg_(seg), size_(seg.file->Size()) {}
  uint64_t size() const { return size_; }
  // View of [off, off + n) (must lie inside the file), valid until the next call.
  absl::StatusOr<std::string_view> View(uint64_t off, size_t n) {
    if (off < buf_off_ || off + n > buf_off_ + buf_.size()) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(std::max(n, kScanChunk), size_ - off));
      buf_.resize(want);
      TOKIMQ_ASSIGN_OR_RETURN(size_t got, seg_.file->PRead(off, want, buf_.data()));
      buf_.resize(got);
      buf_off_ = off;
      if (got < n) return absl::DataLossError(absl::StrCat("short read in ", seg_.path));
    }
    return std::string_view(buf_.data() + (off - buf_off_), n);
  }

 private:
  const Segment& seg_;
  uint64_t size_;
  std::string buf_;
  uint64_t buf_off_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CommitLogImpl>> CommitLogImpl::OpenImpl(
    FileSystem* fs, Clock* clock, CommitLogOptions options, CommitLogRecoveryInfo* info) {
  if (options.dir.empty()) return absl::InvalidArgumentError("commit log dir is empty");
  if (options.segment_size < 256 || options.segment_size > (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError("segment_size must be in [256 B, 2 GiB]");
  }
  TOKIMQ_RETURN_IF_ERROR(fs->CreateDirs(options.dir));
  std::unique_ptr<CommitLogImpl> log(new CommitLogImpl(fs, clock, std::move(options)));
  CommitLogRecoveryInfo local;
  TOKIMQ_RETURN_IF_ERROR(log->Recover(info != nullptr ? info : &local));
  if (log->opt_.flush_mode == FlushMode::kAsync && log->opt_.async_flush_interval_ms > 0) {
    log->flusher_ = std::thread([raw = log.get()] { raw->FlusherLoop(); });
  }
  if (log->opt_.flush_mode == FlushMode::kSync) log->StartGroupCommit();
  return log;
}

bool CommitLogImpl::HasValidRecordAfter(const Segment& seg, uint64_t from) const {
  SegmentReader r(seg);
  const uint64_t seg_size = opt_.segment_size;
  for (uint64_t p = from; p + record::kPrefixSize <= r.size(); ++p) {
    auto v = r.View(p, record::kPrefixSize);
    if (!v.ok()) return false;
    record::Prefix pre = record::DecodePrefix(v->data());
    if (pre.magic == record::kBlankMagicV1) {
      if (record::IsValidBlank(*v) && pre.total_size == seg_size - p) return true;
    } else if (pre.magic == record::kMessageMagicV1 && pre.total_size >= record::kMinMessageSize &&
               p + pre.total_size <= r.size()) {
      auto rec = r.View(p, pre.total_size);
      if (rec.ok() && record::VerifyMessage(*rec) &&
          DecodeFixed64(rec->data() + 28) == static_cast<uint64_t>(seg.base) + p) {
        return true;
      }
    }
  }
  return false;
}

absl::Status CommitLogImpl::ScanSegment(const Segment& seg, uint64_t from, uint64_t* end,
                                        ScanEnd* how, int64_t* records) const {
  SegmentReader r(seg);
  const uint64_t seg_size = opt_.segment_size;
  uint64_t pos = from;
  while (true) {
    if (seg_size - pos < record::kBlankSize) {  // too small for any record: segment is full
      *end = pos;
      *how = ScanEnd::kFinished;
      return absl::OkStatus();
    }
    if (pos == r.size()) {
      *end = pos;
      *how = ScanEnd::kEof;
      return absl::OkStatus();
    }
    bool good = false;
    if (r.size() - pos >= record::kPrefixSize) {
      TOKIMQ_ASSIGN_OR_RETURN(std::string_view v, r.View(pos, record::kPrefixSize));
      record::Prefix pre = record::DecodePrefix(v.data());
      if (pre.magic == record::kBlankMagicV1) {
        if (record::IsValidBlank(v) && pre.total_size == seg_size - pos) {
          *end = pos;
          *how = ScanEnd::kFinished;
          return absl::OkStatus();
        }
      } else if (pre.magic == record::kMessageMagicV1 &&
                 pre.total_size >= record::kMinMessageSize && pos + pre.total_size <= r.size()) {
        TOKIMQ_ASSIGN_OR_RETURN(std::string_view rec, r.View(pos, pre.total_size));
        if (record::VerifyMessage(rec) &&
            DecodeFixed64(rec.data() + 28) == static_cast<uint64_t>(seg.base) + pos) {
          good = true;
          pos += pre.total_size;
          ++*records;
        }
      }
    }
    if (!good) {
      if (HasValidRecordAfter(seg, pos + 1)) {
        return absl::DataLossError(
            absl::StrCat("commit log corrupt: bad record at offset ",
                         seg.base + static_cast<int64_t>(pos), " (byte ", pos, " of segment file ",
                         seg.path, ") is followed by valid records; refusing to open"));
      }
      *end = pos;
      *how = ScanEnd::kBad;
      return absl::OkStatus();
    }
  }
}

absl::Status CommitLogImpl::LoadSegments() {
  const int64_t seg_size = segment_size();
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDir(opt_.dir));
  for (const std::string& name : names) {
    if (!IsSegmentName(name)) continue;
    auto seg = std::make_shared<Segment>();
    seg->base = std::stoll(name);
    seg->path = opt_.dir + "/" + name;
    if (seg->base % seg_size != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment file ", seg->path, " is not aligned to segment_size ", seg_size,
                       "; was the log written with another segment size?"));
    }
    TOKIMQ_ASSIGN_OR_RETURN(seg->file, fs_->Open(seg->path, OpenMode::kReadWrite));
    if (seg->file->Size() > opt_.segment_size) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment file ", seg->path, " is larger than segment_size ", seg_size));
    }
    segments_[seg->base] = std::move(seg);
  }
  return absl::OkStatus();
}

absl::Status CommitLogImpl::CutLogAt(std::map<int64_t, std::shared_ptr<Segment>>::iterator it,
                                     bool missing, uint64_t rel_end, int64_t end,
                                     CommitLogRecoveryInfo* info) {
  Segment& seg = *it->second;
  // The log ends here: nothing valid may follow.
  auto first_later = missing ? it : std::next(it);
  for (auto later = first_later; later != segments_.end(); ++later) {
    if (HasValidRecordAfter(*later->second, 0)) {
      return absl::DataLossError(absl::StrCat(
          "commit log corrupt: log ends at offset ", end, " in ", missing ? opt_.dir : seg.path,
          " but segment file ", later->second->path, " holds valid records; refusing to open"));
    }
  }
  if (!missing) {
    info->truncated_bytes += static_cast<int64_t>(seg.file->Size() - rel_end);
    TOKIMQ_RETURN_IF_ERROR(seg.file->Truncate(rel_end));
    TOKIMQ_RETURN_IF_ERROR(seg.file->Sync());
  }
  while (first_later != segments_.end()) {
    info->truncated_bytes += static_cast<int64_t>(first_later->second->file->Size());
    TOKIMQ_RETURN_IF_ERROR(fs_->Remove(first_later->second->path));
    first_later = segments_.erase(first_later);
  }
  return fs_->SyncDir(opt_.dir);
}

absl::StatusOr<int64_t> CommitLogImpl::ScanForEnd(int64_t ckpt, CommitLogRecoveryInfo* info) {
  const int64_t seg_size = segment_size();
  // Scan from the segment holding the checkpoint: everything before it was fsynced.
  auto it = segments_.begin();
  if (ckpt >= 0) {
    auto c = segments_.upper_bound(ckpt);
    if (c != segments_.begin()) it = std::prev(c);
  }
  int64_t expected = it->first;
  int64_t end = expected;
  for (; it != segments_.end(); ++it) {
    Segment& seg = *it->second;
    uint64_t rel_end = 0;
    ScanEnd how = ScanEnd::kEof;
    bool missing = seg.base != expected;
    if (!missing) {
      TOKIMQ_RETURN_IF_ERROR(ScanSegment(seg, 0, &rel_end, &how, &info->records_scanned));
      TOKIMQ_RETURN_IF_ERROR(seg.file->Sync());
      if (how == ScanEnd::kFinished) {
        expected = seg.base + seg_size;
        end = expected;
        continue;
      }
      end = seg.base + static_cast<int64_t>(rel_end);
    }
    TOKIMQ_RETURN_IF_ERROR(CutLogAt(it, missing, rel_end, end, info));
    break;
  }
  if (ckpt > end) {
    return absl::DataLossError(absl::StrCat("commit log in ", opt_.dir, " ends at ", end,
                                            " but its checkpoint says ", ckpt,
                                            " bytes were durable"));
  }
  if (info->truncated_bytes > 0) {
    TOKIMQ_LOG_WARN("commit log {}: truncated {} bytes of torn tail at offset {}", opt_.dir,
                    info->truncated_bytes, end);
  }
  return end;
}

absl::Status CommitLogImpl::Recover(CommitLogRecoveryInfo* info) {
  const int64_t seg_size = segment_size();
  TOKIMQ_RETURN_IF_ERROR(LoadSegments());
  auto marker = ReadOffsetFile(fs_, clean_marker_path_, kCleanShutdownMagic);
  auto ckpt_or = ReadOffsetFile(fs_, checkpoint_path_, kCommitLogCheckpointMagic);
  const int64_t ckpt = ckpt_or.ok() ? *ckpt_or : -1;
  if (!ckpt_or.ok() && !absl::IsNotFound(ckpt_or.status())) {
    TOKIMQ_LOG_WARN("ignoring commit log checkpoint: {}", ckpt_or.status().ToString());
  }

  int64_t end = 0;
  if (segments_.empty()) {
    if (ckpt > 0) {
      return absl::DataLossError(absl::StrCat("checkpoint in ", opt_.dir, " says ", ckpt,
                                              " bytes are durable but no segment file exists"));
    }
  } else {
    const Segment& last = *segments_.rbegin()->second;
    bool trusted = false;
    if (marker.ok()) {
      const int64_t e = *marker;
      trusted =
          (e == last.base + static_cast<int64_t>(last.file->Size()) || e == last.base + seg_size) &&
          e >= ckpt;
      end = e;
    }
    info->clean_shutdown = trusted;
    if (!trusted) {
      TOKIMQ_ASSIGN_OR_RETURN(end, ScanForEnd(ckpt, info));
    }
  }
  min_offset_.store(segments_.empty() ? end : segments_.begin()->first);
  write_pos_ = end;
  max_offset_.store(end);
  flushed_.store(end);
  if (ckpt != end) {
    TOKIMQ_RETURN_IF_ERROR(WriteOffsetFile(fs_, checkpoint_path_, kCommitLogCheckpointMagic, end));
  }
  checkpoint_segment_ = end / seg_size;
  ReleaseSealedSegments();  // everything below `end` was fsynced above
  if (fs_->Exists(clean_marker_path_)) {
    // From here on a crash must not look like a clean shutdown.
    TOKIMQ_RETURN_IF_ERROR(fs_->Remove(clean_marker_path_));
    TOKIMQ_RETURN_IF_ERROR(fs_->SyncDir(opt_.dir));
  }
  return absl::OkStatus();
}

}  // namespace tokimq
