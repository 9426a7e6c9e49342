// CommitLog replication: reading runs of whole records on a leader (ReadChunk) and appending
// them byte for byte on a follower after checking each record (AppendChunk). Issue 20;
// docs/replication.md has the protocol, docs/formats/commitlog.md the record grammar.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "commit_log_impl.h"
#include "commitlog/record.h"
#include "common/status.h"
#include "offset_file.h"

namespace tokimq {

absl::StatusOr<ReplicaChunk> CommitLog::ReadChunk(PhysicalOffset, size_t) const {
  return absl::UnimplementedError("this CommitLog does not replicate");
}

absl::StatusOr<PhysicalOffset> CommitLog::AppendChunk(const ReplicaChunk&) {
  return absl::UnimplementedError("this CommitLog does not replicate");
}

namespace {

PhysicalOffset SegmentEnd(PhysicalOffset offset, int64_t segment_size) {
  return PhysicalOffset((offset.value() / segment_size + 1) * segment_size);
}

// Where the next record after `offset` starts: the next segment's base when less than a blank
// record of room is left in offset's segment (CommitLogImpl::RollLocked writes nothing there).
PhysicalOffset NextRecordStart(PhysicalOffset offset, int64_t segment_size) {
  const PhysicalOffset seg_end = SegmentEnd(offset, segment_size);
  return seg_end - offset < static_cast<int64_t>(record::kBlankSize) ? seg_end : offset;
}

// Checks every record of `chunk` (see CommitLog::AppendChunk) and returns the log end after
// it: the chunk's end, or the segment's end after a blank record.
absl::StatusOr<PhysicalOffset> CheckChunk(const ReplicaChunk& chunk, int64_t segment_size) {
  const std::string_view bytes = chunk.bytes;
  const PhysicalOffset seg_end = SegmentEnd(chunk.offset, segment_size);
  if (chunk.offset + static_cast<int64_t>(bytes.size()) > seg_end) {
    return absl::DataLossError(absl::StrCat("replica chunk at ", chunk.offset.value(), " of ",
                                            bytes.size(), " bytes crosses its segment end"));
  }
  size_t pos = 0;
  while (pos < bytes.size()) {
    const PhysicalOffset at = chunk.offset + static_cast<int64_t>(pos);
    if (bytes.size() - pos < record::kPrefixSize) {
      return absl::DataLossError(absl::StrCat("replica chunk: torn record at ", at.value()));
    }
    const record::Prefix pre = record::DecodePrefix(bytes.data() + pos);
    if (pre.magic == record::kBlankMagicV1) {
      if (!record::IsValidBlank(bytes.substr(pos, record::kBlankSize)) ||
          static_cast<int64_t>(pre.total_size) != seg_end - at ||
          pos + record::kBlankSize != bytes.size()) {
        return absl::DataLossError(absl::StrCat("replica chunk: bad blank record at ", at.value()));
      }
      return seg_end;
    }
    if (pre.total_size < record::kMinMessageSize || pre.total_size > bytes.size() - pos) {
      return absl::DataLossError(
          absl::StrCat("replica chunk: bad record size ", pre.total_size, " at ", at.value()));
    }
    record::RecordView view;
    absl::Status s = record::DecodeView(bytes.substr(pos, pre.total_size), &view);
    if (!s.ok()) {
      return absl::DataLossError(absl::StrCat("replica chunk: ", s.message(), " at ", at.value()));
    }
    if (view.physical_offset != at) {
      return absl::DataLossError(absl::StrCat("replica chunk: record at ", at.value(),
                                              " says it belongs at ",
                                              view.physical_offset.value()));
    }
    pos += pre.total_size;
  }
  return chunk.offset + static_cast<int64_t>(bytes.size());
}

}  // namespace

absl::StatusOr<ReplicaChunk> CommitLogImpl::ReadChunk(PhysicalOffset from,
                                                      size_t max_bytes) const {
  const PhysicalOffset max = MaxOffset();
  if (from < MinOffset()) {
    return absl::NotFoundError(absl::StrCat("offset ", from.value(), " was deleted (log starts at ",
                                            MinOffset().value(), ")"));
  }
  if (from > max) {
    return absl::OutOfRangeError(absl::StrCat("offset ", from.value(),
                                              " is past the end of the log (", max.value(), ")"));
  }
  ReplicaChunk chunk;
  chunk.offset = NextRecordStart(from, segment_size());
  if (chunk.offset >= max) {
    chunk.offset = from;
    return chunk;
  }
  const PhysicalOffset limit = std::min(max, SegmentEnd(chunk.offset, segment_size()));
  // Read at least a few KiB so that the first record's prefix is there even for a tiny
  // max_bytes; then cut to whole records, the first one sent whole even past max_bytes.
  std::string window;
  const size_t want = static_cast<size_t>(
      std::min<int64_t>(limit - chunk.offset, std::max<size_t>(max_bytes, 4096)));
  {
    // The window may pass the end of the segment file: a blank record covers the rest of its
    // segment but is 12 bytes long, and nothing is written after it. A short read is fine.
    TOKIMQ_ASSIGN_OR_RETURN(std::shared_ptr<Segment> seg, SegmentForRange(chunk.offset.value(), 1));
    window.resize(want);
    TOKIMQ_ASSIGN_OR_RETURN(
        size_t n, seg->file->PRead(static_cast<uint64_t>(chunk.offset.value() - seg->base), want,
                                   window.data()));
    window.resize(n);
  }
  size_t end = 0;
  while (window.size() - end >= record::kPrefixSize) {
    const record::Prefix pre = record::DecodePrefix(window.data() + end);
    const bool blank = pre.magic == record::kBlankMagicV1;
    if (!blank && pre.magic != record::kMessageMagicV1) {
      return absl::DataLossError(absl::StrCat("no record starts at offset ",
                                              (chunk.offset + end).value(), " in ",
                                              SegmentPathFor(chunk.offset.value())));
    }
    const size_t size = blank ? record::kBlankSize : pre.total_size;
    if (size < record::kPrefixSize) {
      return absl::DataLossError(absl::StrCat("bad record size at offset ",
                                              (chunk.offset + end).value(), " in ",
                                              SegmentPathFor(chunk.offset.value())));
    }
    if (end > 0 && end + size > max_bytes) break;
    if (end + size > window.size()) {
      if (end == 0 && chunk.offset + static_cast<int64_t>(size) <= limit) {
        TOKIMQ_RETURN_IF_ERROR(ReadRaw(chunk.offset, size, &window));
        end = size;
      }
      break;
    }
    end += size;
    if (blank) break;
  }
  window.resize(end);
  chunk.bytes = std::move(window);
  return chunk;
}

absl::StatusOr<PhysicalOffset> CommitLogImpl::AppendChunk(const ReplicaChunk& chunk) {
  std::lock_guard<std::mutex> l(write_mu_);
  if (closed_) return absl::FailedPreconditionError("commit log is closed");
  if (has_failed_.load(std::memory_order_acquire)) return FailedStatus();
  const PhysicalOffset end(write_pos_);
  if (chunk.offset != end && chunk.offset != NextRecordStart(end, segment_size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replica chunk starts at ", chunk.offset.value(), " but this log ends at ", write_pos_));
  }
  TOKIMQ_ASSIGN_OR_RETURN(PhysicalOffset new_end, CheckChunk(chunk, segment_size()));
  if (chunk.bytes.empty()) return end;
  const int64_t base = chunk.offset.value() - chunk.offset.value() % segment_size();
  auto seg = FindSegment(chunk.offset.value());
  absl::Status s;
  if (seg == nullptr) {
    auto created = CreateSegment(base);
    if (created.ok()) {
      seg = *created;
    } else {
      s = created.status();
    }
  }
  if (s.ok()) {
    s = seg->file->PWrite(static_cast<uint64_t>(chunk.offset.value() - base), chunk.bytes);
  }
  if (!s.ok()) return OnAppendFailedLocked(s, 1);
  write_pos_ = new_end.value();
  max_offset_.store(new_end.value(), std::memory_order_release);
  return new_end;
}

absl::StatusOr<int64_t> CommitLog::TruncateFiles(FileSystem* fs, const std::string& dir,
                                                 int64_t segment_size,
                                                 PhysicalOffset end_offset) {
  const int64_t end = end_offset.value();
  if (end < 0 || segment_size <= 0) return absl::InvalidArgumentError("bad truncation point");
  if (!fs->Exists(dir)) return 0;
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<std::string> names, fs->ListDir(dir));
  int64_t removed = 0;
  for (const std::string& name : names) {
    if (name.size() != 20 || !std::all_of(name.begin(), name.end(),
                                          [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const int64_t base = std::stoll(name);
    const std::string path = dir + "/" + name;
    TOKIMQ_ASSIGN_OR_RETURN(auto file, fs->Open(path, OpenMode::kReadWrite));
    const int64_t size = static_cast<int64_t>(file->Size());
    if (base >= end) {
      removed += size;
      file.reset();
      TOKIMQ_RETURN_IF_ERROR(fs->Remove(path));
    } else if (base + size > end) {
      removed += base + size - end;
      TOKIMQ_RETURN_IF_ERROR(file->Truncate(static_cast<uint64_t>(end - base)));
      TOKIMQ_RETURN_IF_ERROR(file->Sync());
    }
  }
  const std::string ckpt_path = dir + "/checkpoint";
  auto ckpt = ReadOffsetFile(fs, ckpt_path, kCommitLogCheckpointMagic);
  if (ckpt.ok() && *ckpt > end) {
    TOKIMQ_RETURN_IF_ERROR(WriteOffsetFile(fs, ckpt_path, kCommitLogCheckpointMagic, end));
  }
  if (fs->Exists(dir + "/clean_shutdown")) TOKIMQ_RETURN_IF_ERROR(fs->Remove(dir + "/clean_shutdown"));
  TOKIMQ_RETURN_IF_ERROR(fs->SyncDir(dir));
  return removed;
}

}  // namespace tokimq
