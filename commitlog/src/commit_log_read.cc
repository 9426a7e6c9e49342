// CommitLog reads: one record by offset (Read), the next record (ReadNext, for scans), and raw
// spans of adjacent records (ReadRaw, ReadSpan) that MessageStore decodes in place.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "commit_log_impl.h"
#include "commitlog/record.h"
#include "common/status.h"

namespace tokimq {
namespace {
// First pread of a record: header and a small body at once, into a stack buffer (no zero-fill,
// no allocation); larger records get a second pread into an exact-size heap buffer.
constexpr size_t kReadAhead = 1024;
struct RawRecord {
  char inline_buf[kReadAhead];
  std::unique_ptr<char[]> heap;  // set when the record is larger than kReadAhead
  uint32_t size = 0;
  bool blank = false;
  std::string_view bytes() const { return std::string_view(heap ? heap.get() : inline_buf, size); }
};
}  // namespace

absl::StatusOr<std::shared_ptr<Segment>> CommitLogImpl::SegmentForRange(int64_t physical_offset,
                                                                        size_t len) const {
  auto seg = FindSegment(physical_offset);
  if (seg == nullptr || physical_offset < MinOffset().value()) {
    return absl::NotFoundError(absl::StrCat("offset ", physical_offset, " was deleted"));
  }
  const int64_t rel = physical_offset - seg->base;
  if (rel + static_cast<int64_t>(len) > segment_size() ||
      physical_offset + static_cast<int64_t>(len) > MaxOffset().value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("range at ", physical_offset, " of ", len, " bytes is outside the log"));
  }
  return seg;
}

absl::Status CommitLogImpl::ReadRaw(PhysicalOffset at, size_t len, std::string* out) const {
  const int64_t physical_offset = at.value();
  TOKIMQ_ASSIGN_OR_RETURN(std::shared_ptr<Segment> seg, SegmentForRange(physical_offset, len));
  const int64_t rel = physical_offset - seg->base;
  out->resize(len);
  TOKIMQ_ASSIGN_OR_RETURN(size_t n, seg->file->PRead(static_cast<uint64_t>(rel), len, out->data()));
  if (n != len) {
    return absl::DataLossError(
        absl::StrCat("short read at offset ", physical_offset, " of ", seg->path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> CommitLogImpl::ReadSpan(
    PhysicalOffset physical_offset, size_t len, std::string* scratch,
    std::shared_ptr<const Segment>* keep) const {
  TOKIMQ_ASSIGN_OR_RETURN(std::shared_ptr<Segment> seg,
                          SegmentForRange(physical_offset.value(), len));
  const int64_t rel = physical_offset.value() - seg->base;
  // Below MaxOffset means written to the file (appends reach the page cache before MaxOffset
  // moves), so the mapped bytes exist.
  if (const char* map = seg->file->MapForRead(static_cast<uint64_t>(segment_size()))) {
    *keep = seg;
    return std::string_view(map + rel, len);
  }
  TOKIMQ_RETURN_IF_ERROR(ReadRaw(physical_offset, len, scratch));
  return std::string_view(*scratch);
}

// Gives a decode failure its place (kDataLoss naming offset and segment file) and checks that
// a record really starts at `physical_offset`. Shared by DecodeAt and DecodeViewAt.
absl::Status CommitLogImpl::CheckDecoded(absl::Status decoded, PhysicalOffset stored_offset,
                                         PhysicalOffset physical_offset) const {
  if (!decoded.ok()) {
    return absl::DataLossError(absl::StrCat(decoded.message(), " at offset ",
                                            physical_offset.value(), " in ",
                                            SegmentPathFor(physical_offset.value())));
  }
  if (stored_offset != physical_offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("no record starts at offset ", physical_offset.value()));
  }
  return absl::OkStatus();
}

absl::Status CommitLogImpl::DecodeAt(std::string_view rec, PhysicalOffset physical_offset,
                                     Message* out) const {
  absl::Status s = record::Decode(rec, out);
  return CheckDecoded(s, s.ok() ? out->physical_offset : PhysicalOffset::kNone(), physical_offset);
}

absl::Status CommitLogImpl::DecodeViewAt(std::string_view rec, PhysicalOffset physical_offset,
                                         record::RecordView* out) const {
  absl::Status s = record::DecodeView(rec, out);
  return CheckDecoded(s, s.ok() ? out->physical_offset : PhysicalOffset::kNone(), physical_offset);
}

// Reads the record (message or blank) at `off`. Sets *total to its size.
static absl::Status ReadRecordAt(const Segment& seg, int64_t off, int64_t limit, RawRecord* rec,
                                 uint32_t* total) {
  const int64_t rel = off - seg.base;
  const int64_t avail = limit - off;
  if (avail < static_cast<int64_t>(record::kPrefixSize)) {
    return absl::InvalidArgumentError(absl::StrCat("no record starts at offset ", off));
  }
  size_t first = static_cast<size_t>(std::min<int64_t>(avail, kReadAhead));
  TOKIMQ_ASSIGN_OR_RETURN(size_t n,
                          seg.file->PRead(static_cast<uint64_t>(rel), first, rec->inline_buf));
  if (n < record::kPrefixSize) {
    return absl::DataLossError(absl::StrCat("short read at offset ", off, " of ", seg.path));
  }
  record::Prefix pre = record::DecodePrefix(rec->inline_buf);
  if (pre.magic == record::kBlankMagicV1) {
    if (!record::IsValidBlank(std::string_view(rec->inline_buf, record::kBlankSize))) {
      return absl::DataLossError(
          absl::StrCat("bad blank record at offset ", off, " in ", seg.path));
    }
    rec->blank = true;
    rec->size = record::kBlankSize;
    *total = pre.total_size;
    return absl::OkStatus();
  }
  if (pre.magic != record::kMessageMagicV1) {
    return absl::InvalidArgumentError(absl::StrCat("no record starts at offset ", off));
  }
  if (pre.total_size < record::kMinMessageSize || pre.total_size > avail) {
    return absl::DataLossError(
        absl::StrCat("bad record size ", pre.total_size, " at offset ", off, " in ", seg.path));
  }
  if (pre.total_size > n) {
    // pre.total_size <= avail <= segment size: checked before allocating.
    rec->heap = std::make_unique_for_overwrite<char[]>(pre.total_size);
    std::copy_n(rec->inline_buf, n, rec->heap.get());
    TOKIMQ_ASSIGN_OR_RETURN(size_t m, seg.file->PRead(static_cast<uint64_t>(rel) + n,
                                                      pre.total_size - n, rec->heap.get() + n));
    if (m != pre.total_size - n) {
      return absl::DataLossError(absl::StrCat("short read at offset ", off, " of ", seg.path));
    }
  }
  rec->size = pre.total_size;
  *total = pre.total_size;
  return absl::OkStatus();
}

absl::StatusOr<Message> CommitLogImpl::Read(PhysicalOffset at) const {
  const int64_t physical_offset = at.value();
  const int64_t max = MaxOffset().value();
  const int64_t min = MinOffset().value();
  if (physical_offset < min || physical_offset >= max) {
    return absl::NotFoundError(
        absl::StrCat("offset ", physical_offset, " is outside [", min, ", ", max, ")"));
  }
  auto seg = FindSegment(physical_offset);
  if (seg == nullptr)
    return absl::NotFoundError(absl::StrCat("offset ", physical_offset, " was deleted"));
  RawRecord rec;
  uint32_t total = 0;
  TOKIMQ_RETURN_IF_ERROR(
      ReadRecordAt(*seg, physical_offset, std::min(max, seg->base + segment_size()), &rec, &total));
  if (rec.blank) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset ", physical_offset, " holds a blank record, not a message"));
  }
  Message msg;
  TOKIMQ_RETURN_IF_ERROR(DecodeAt(rec.bytes(), at, &msg));
  return msg;
}

absl::StatusOr<std::pair<Message, PhysicalOffset>> CommitLogImpl::ReadNext(
    PhysicalOffset at) const {
  int64_t off = at.value();
  while (true) {
    const int64_t max = MaxOffset().value();
    const int64_t min = MinOffset().value();
    if (off < min || off >= max) {
      return absl::NotFoundError(
          absl::StrCat("offset ", off, " is outside [", min, ", ", max, ")"));
    }
    const int64_t seg_end = (off / segment_size() + 1) * segment_size();
    if (seg_end - off < static_cast<int64_t>(record::kBlankSize)) {
      off = seg_end;
      continue;
    }
    auto seg = FindSegment(off);
    if (seg == nullptr) return absl::NotFoundError(absl::StrCat("offset ", off, " was deleted"));
    RawRecord rec;
    uint32_t total = 0;
    TOKIMQ_RETURN_IF_ERROR(ReadRecordAt(*seg, off, std::min(max, seg_end), &rec, &total));
    if (rec.blank) {
      off = seg_end;
      continue;
    }
    Message msg;
    TOKIMQ_RETURN_IF_ERROR(DecodeAt(rec.bytes(), PhysicalOffset(off), &msg));
    return std::make_pair(std::move(msg), PhysicalOffset(off + total));
  }
}

}  // namespace tokimq
