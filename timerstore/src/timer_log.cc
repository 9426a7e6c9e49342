#include "timerstore/timer_log.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/logging.h"
#include "common/status.h"

namespace tokimq {
namespace {

constexpr size_t kCrcOffset = kTimerUnitSize - 4;
constexpr size_t kBufferLimit = 64 * 1024;
// While the buffer cannot be written out (disk full), Append keeps units in memory up to this
// many bytes (~233k units), then refuses new ones until a write-out succeeds.
constexpr size_t kMaxBufferWhileFailing = 16 << 20;

std::string SegmentName(int64_t base) {
  char name[32];
  std::snprintf(name, sizeof(name), "%020lld", static_cast<long long>(base));
  return name;
}

bool ParseSegmentName(const std::string& name, int64_t* base) {
  if (name.size() != 20) return false;
  int64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *base = v;
  return true;
}

}  // namespace

void EncodeTimerUnit(const TimerUnit& u, char* dst) {
  EncodeFixed32(dst + 0, static_cast<uint32_t>(kTimerUnitSize));
  EncodeFixed32(dst + 4, u.flags);
  EncodeFixed64(dst + 8, static_cast<uint64_t>(u.prev_pos.value()));
  EncodeFixed64(dst + 16, static_cast<uint64_t>(u.write_ms));
  EncodeFixed64(dst + 24, static_cast<uint64_t>(u.deliver_ms));
  EncodeFixed64(dst + 32, static_cast<uint64_t>(u.slot_tick));
  EncodeFixed64(dst + 40, static_cast<uint64_t>(u.physical_offset.value()));
  EncodeFixed64(dst + 48, static_cast<uint64_t>(u.ref));
  EncodeFixed32(dst + 56, u.msg_size);
  EncodeFixed32(dst + 60, u.topic_hash);
  EncodeFixed32(dst + 64, u.roll_count);
  EncodeFixed32(dst + kCrcOffset, crc32c::Value(dst, kCrcOffset));
}

absl::Status DecodeTimerUnit(const char* src, TimerUnit* u) {
  if (DecodeFixed32(src) != kTimerUnitSize) {
    return absl::DataLossError(absl::StrCat("timer unit: bad size ", DecodeFixed32(src)));
  }
  if (DecodeFixed32(src + kCrcOffset) != crc32c::Value(src, kCrcOffset)) {
    return absl::DataLossError("timer unit: CRC mismatch");
  }
  u->flags = DecodeFixed32(src + 4);
  u->prev_pos = TimerLogPosition(static_cast<int64_t>(DecodeFixed64(src + 8)));
  u->write_ms = static_cast<int64_t>(DecodeFixed64(src + 16));
  u->deliver_ms = static_cast<int64_t>(DecodeFixed64(src + 24));
  u->slot_tick = static_cast<int64_t>(DecodeFixed64(src + 32));
  u->physical_offset = PhysicalOffset(static_cast<int64_t>(DecodeFixed64(src + 40)));
  u->ref = static_cast<int64_t>(DecodeFixed64(src + 48));
  u->msg_size = DecodeFixed32(src + 56);
  u->topic_hash = DecodeFixed32(src + 60);
  u->roll_count = DecodeFixed32(src + 64);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TimerLog>> TimerLog::Open(FileSystem* fs, std::string dir,
                                                         uint64_t segment_size,
                                                         TimerLogPosition validate_from) {
  segment_size = std::max<uint64_t>(kTimerUnitSize, segment_size - segment_size % kTimerUnitSize);
  std::unique_ptr<TimerLog> log(new TimerLog(fs, std::move(dir), segment_size));
  TOKIMQ_RETURN_IF_ERROR(fs->CreateDirs(log->dir_));
  TOKIMQ_RETURN_IF_ERROR(log->Recover(validate_from));
  return log;
}

TimerLog::~TimerLog() = default;

std::string TimerLog::SegmentPath(int64_t base) const { return dir_ + "/" + SegmentName(base); }

absl::Status TimerLog::Recover(TimerLogPosition validate_from) {
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDir(dir_));
  for (const std::string& name : names) {
    int64_t base = 0;
    if (!ParseSegmentName(name, &base)) continue;
    if (base % static_cast<int64_t>(segment_size_) != 0) {
      return absl::DataLossError(absl::StrCat("timerlog: misaligned segment ", SegmentPath(base)));
    }
    TOKIMQ_ASSIGN_OR_RETURN(auto f, fs_->Open(SegmentPath(base), OpenMode::kReadWrite));
    segments_[base] = std::move(f);
  }
  if (segments_.empty()) return absl::OkStatus();
  // End of data: the last segment's size (earlier segments are full by construction).
  auto last = std::prev(segments_.end());
  int64_t end =
      last->first + static_cast<int64_t>(std::min<uint64_t>(last->second->Size(), segment_size_));
  int64_t pos = std::max<int64_t>(validate_from.value(), segments_.begin()->first);
  pos -= pos % static_cast<int64_t>(kTimerUnitSize);
  // So that ReadRawLocked reads files, not the (empty) buffer.
  written_pos_ = write_pos_ = TimerLogPosition(end);
  char buf[kTimerUnitSize];
  int64_t bad_at = -1;
  for (; pos + static_cast<int64_t>(kTimerUnitSize) <= end; pos += kTimerUnitSize) {
    absl::Status st = ReadRawLocked(TimerLogPosition(pos), buf);
    TimerUnit u;
    if (st.ok()) st = DecodeTimerUnit(buf, &u);
    if (!st.ok()) {
      if (bad_at < 0) bad_at = pos;
    } else if (bad_at >= 0) {
      int64_t base = bad_at - bad_at % static_cast<int64_t>(segment_size_);
      return absl::DataLossError(absl::StrCat("timerlog: corrupt unit in ", SegmentPath(base),
                                              " at offset ", bad_at - base,
                                              " followed by valid units"));
    }
  }
  int64_t valid_end = bad_at >= 0 ? bad_at : std::min(pos, end);
  if (valid_end < end || end % static_cast<int64_t>(kTimerUnitSize) != 0 ||
      last->second->Size() > segment_size_) {
    // Truncate the torn tail; drop whole segments after it.
    for (auto it = segments_.begin(); it != segments_.end();) {
      int64_t base = it->first;
      int64_t keep = std::clamp<int64_t>(valid_end - base, 0, static_cast<int64_t>(segment_size_));
      if (keep == 0 && base > 0 && base >= valid_end) {
        truncated_bytes_ += static_cast<int64_t>(it->second->Size());
        std::string path = it->second->path();
        it = segments_.erase(it);
        TOKIMQ_RETURN_IF_ERROR(fs_->Remove(path));
        continue;
      }
      if (static_cast<int64_t>(it->second->Size()) > keep) {
        truncated_bytes_ += static_cast<int64_t>(it->second->Size()) - keep;
        TOKIMQ_RETURN_IF_ERROR(it->second->Truncate(static_cast<uint64_t>(keep)));
        TOKIMQ_RETURN_IF_ERROR(it->second->Sync());
      }
      ++it;
    }
    TOKIMQ_LOG_WARN("timerlog: truncated {} torn bytes at position {}", truncated_bytes_,
                    valid_end);
    end = valid_end;
  }
  write_pos_ = written_pos_ = flushed_pos_ = TimerLogPosition(end);
  return absl::OkStatus();
}

absl::StatusOr<File*> TimerLog::SegmentLocked(int64_t base, bool create) {
  auto it = segments_.find(base);
  if (it != segments_.end()) return it->second.get();
  if (!create) return absl::NotFoundError(absl::StrCat("timerlog: no segment ", base));
  TOKIMQ_ASSIGN_OR_RETURN(auto f, fs_->Open(SegmentPath(base), OpenMode::kTruncate));
  File* raw = f.get();
  segments_[base] = std::move(f);
  TOKIMQ_RETURN_IF_ERROR(fs_->SyncDir(dir_));
  return raw;
}

absl::StatusOr<TimerLogPosition> TimerLog::Append(const TimerUnit& unit) {
  std::lock_guard<std::mutex> l(mu_);
  // Refused before anything changes: the caller may retry the same unit later.
  if (buffer_.size() >= kMaxBufferWhileFailing) TOKIMQ_RETURN_IF_ERROR(WriteBufferLocked());
  char buf[kTimerUnitSize];
  EncodeTimerUnit(unit, buf);
  const TimerLogPosition pos = write_pos_;
  buffer_.append(buf, kTimerUnitSize);
  write_pos_ += kTimerUnitSize;
  // The unit is appended (readable, and written out by a later call) whatever the write-out
  // does: reporting an error here made the caller append it a second time.
  if (buffer_.size() >= kBufferLimit) (void)WriteBufferLocked();
  return pos;
}

absl::Status TimerLog::WriteBufferLocked() {
  size_t done = 0;
  absl::Status s;
  while (done < buffer_.size()) {
    const int64_t pos = written_pos_.value();
    int64_t base = pos - pos % static_cast<int64_t>(segment_size_);
    size_t room = static_cast<size_t>(base + static_cast<int64_t>(segment_size_) - pos);
    size_t n = std::min(room, buffer_.size() - done);
    absl::StatusOr<File*> f = SegmentLocked(base, true);
    s = f.status();
    if (s.ok()) {
      s = (*f)->PWrite(static_cast<uint64_t>(pos - base),
                       std::string_view(buffer_).substr(done, n));
    }
    if (!s.ok()) break;
    done += n;
    written_pos_ += static_cast<int64_t>(n);
  }
  // What was written leaves the buffer even on a failure (the buffer starts at written_pos_);
  // the rest is written again at the same positions by the next call.
  buffer_.erase(0, done);
  if (!s.ok() && !write_failing_) {
    write_failing_ = true;
    TOKIMQ_LOG_WARN(
        "timerlog {}: writing units at position {} failed ({}); kept in memory and "
        "retried",
        dir_, written_pos_, s.ToString());
  } else if (s.ok() && write_failing_) {
    write_failing_ = false;
    TOKIMQ_LOG_INFO("timerlog {}: writes succeed again", dir_);
  }
  return s;
}

absl::Status TimerLog::Flush() {
  TOKIMQ_ASSIGN_OR_RETURN(TimerLogPosition end, WriteOut());
  return SyncTo(end);
}

absl::StatusOr<TimerLogPosition> TimerLog::WriteOut() {
  std::lock_guard<std::mutex> l(mu_);
  TOKIMQ_RETURN_IF_ERROR(WriteBufferLocked());
  return written_pos_;
}

absl::Status TimerLog::SyncTo(TimerLogPosition end) {
  std::vector<File*> to_sync;
  {
    std::lock_guard<std::mutex> l(mu_);
    end = std::min(end, written_pos_);
    if (flushed_pos_ >= end) return absl::OkStatus();
    // Every segment touched since the last flush (usually one). Segments are never removed
    // while the log is open, so the pointers stay valid.
    const int64_t flushed = flushed_pos_.value();
    int64_t first_base = flushed - flushed % static_cast<int64_t>(segment_size_);
    for (auto it = segments_.lower_bound(first_base);
         it != segments_.end() && it->first < end.value();
         ++it) {
      to_sync.push_back(it->second.get());
    }
  }
  for (File* f : to_sync) TOKIMQ_RETURN_IF_ERROR(f->Sync());
  std::lock_guard<std::mutex> l(mu_);
  flushed_pos_ = std::max(flushed_pos_, end);
  // Segments this process fsynced to their end and will never write again cost no descriptor
  // from here on: they are read through their mapping (issue 25; File::ReleaseDescriptor).
  const int64_t last = segments_.empty() ? 0 : segments_.rbegin()->first;
  for (auto it = segments_.lower_bound(released_below_);
       it != segments_.end() && it->first < last &&
       it->first + static_cast<int64_t>(segment_size_) <= end.value();
       ++it) {
    if (!it->second->ReleaseDescriptor(segment_size_)) break;  // cannot map: keep it
    released_below_ = it->first + static_cast<int64_t>(segment_size_);
  }
  return absl::OkStatus();
}

absl::Status TimerLog::ReadRawLocked(TimerLogPosition position, char* buf) const {
  if (position >= written_pos_) {
    size_t at = static_cast<size_t>(position - written_pos_);
    if (at + kTimerUnitSize > buffer_.size()) return absl::OutOfRangeError("timerlog: past end");
    std::copy_n(buffer_.data() + at, kTimerUnitSize, buf);
    return absl::OkStatus();
  }
  const int64_t pos = position.value();
  int64_t base = pos - pos % static_cast<int64_t>(segment_size_);
  auto it = segments_.find(base);
  if (it == segments_.end()) {
    return absl::NotFoundError(absl::StrCat("timerlog: position ", pos, " not stored"));
  }
  // Below written_pos_ the unit is in the file, so a read mapping holds it: walking a slot
  // reads one unit per message (100k+ for a busy second), and a pread each made the walk, on
  // the dequeue thread, long enough to hold releases back by hundreds of milliseconds.
  if (const char* map = it->second->MapForRead(segment_size_)) {
    std::copy_n(map + (pos - base), kTimerUnitSize, buf);
    return absl::OkStatus();
  }
  TOKIMQ_ASSIGN_OR_RETURN(
      size_t n, it->second->PRead(static_cast<uint64_t>(pos - base), kTimerUnitSize, buf));
  if (n != kTimerUnitSize) return absl::DataLossError("timerlog: short unit");
  return absl::OkStatus();
}

absl::StatusOr<TimerUnit> TimerLog::Read(TimerLogPosition position) const {
  const int64_t pos = position.value();
  if (pos < 0 || pos % static_cast<int64_t>(kTimerUnitSize) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("timerlog: unaligned position ", pos));
  }
  std::lock_guard<std::mutex> l(mu_);
  if (position >= write_pos_) return absl::OutOfRangeError("timerlog: past end");
  char buf[kTimerUnitSize];
  TOKIMQ_RETURN_IF_ERROR(ReadRawLocked(position, buf));
  TimerUnit u;
  absl::Status st = DecodeTimerUnit(buf, &u);
  if (!st.ok()) return absl::DataLossError(absl::StrCat(st.message(), " at position ", pos));
  return u;
}

TimerLogPosition TimerLog::WritePos() const {
  std::lock_guard<std::mutex> l(mu_);
  return write_pos_;
}
TimerLogPosition TimerLog::FlushedPos() const {
  std::lock_guard<std::mutex> l(mu_);
  return flushed_pos_;
}
TimerLogPosition TimerLog::MinPos() const {
  std::lock_guard<std::mutex> l(mu_);
  return segments_.empty() ? write_pos_ : TimerLogPosition(segments_.begin()->first);
}

}  // namespace tokimq
