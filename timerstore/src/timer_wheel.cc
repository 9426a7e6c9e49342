#include "timerstore/timer_wheel.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/logging.h"
#include "common/status.h"

namespace tokimq {
namespace {

constexpr uint32_t kWheelMagic = 0x4857'4B54;  // "TKWH" little-endian
constexpr uint32_t kWheelVersion = 1;

}  // namespace

std::string EncodeTimerWheelHeader(int64_t precision_ms, uint64_t slot_count) {
  std::string h;
  PutFixed32(&h, kWheelMagic);
  PutFixed32(&h, kWheelVersion);
  PutFixed64(&h, static_cast<uint64_t>(precision_ms));
  PutFixed64(&h, slot_count);
  PutFixed32(&h, 0);  // reserved
  PutFixed32(&h, crc32c::Value(h));
  return h;
}

void EncodeTimerSlot(const TimerSlot& s, char* dst) {
  // Stored tick is tick + 1 so that an all-zero record means "empty". The +1 / -1 are done on
  // uint64_t (wrapping, defined for every value: INT64_MAX + 1 was signed overflow; found by
  // fuzz/timer_wheel on a slot record whose stored tick is 2^63).
  EncodeFixed64(dst, static_cast<uint64_t>(s.tick) + 1);
  EncodeFixed64(dst + 8, static_cast<uint64_t>(s.first_pos.value()) + 1);
  EncodeFixed64(dst + 16, static_cast<uint64_t>(s.last_pos.value()) + 1);
  EncodeFixed32(dst + 24, s.count);
  // Only the default slot {-1, -1, -1, 0} is stored as all zero bytes (CRC 0 included); any
  // other slot gets its CRC. Before, every slot with negative fields and count 0 was written
  // with CRC 0 over non-zero bytes, which then failed its CRC when read (fuzz/timer_wheel).
  bool empty = s.tick == -1 && s.first_pos == TimerLogPosition::kNone() &&
               s.last_pos == TimerLogPosition::kNone() && s.count == 0;
  EncodeFixed32(dst + 28, empty ? 0 : crc32c::Value(dst, 28));
}

bool DecodeTimerSlot(const char* src, TimerSlot* s) {
  uint32_t crc = DecodeFixed32(src + 28);
  bool all_zero = std::all_of(src, src + TimerWheel::kSlotSize, [](char c) { return c == 0; });
  if (all_zero) {
    *s = TimerSlot{};
    return true;
  }
  if (crc != crc32c::Value(src, 28)) return false;
  s->tick = static_cast<int64_t>(DecodeFixed64(src) - 1);
  s->first_pos = TimerLogPosition(static_cast<int64_t>(DecodeFixed64(src + 8) - 1));
  s->last_pos = TimerLogPosition(static_cast<int64_t>(DecodeFixed64(src + 16) - 1));
  s->count = DecodeFixed32(src + 24);
  return true;
}

TimerWheel::TimerWheel(FileSystem* fs, std::string path, int64_t precision_ms, uint64_t slot_count)
    : fs_(fs), path_(std::move(path)), precision_ms_(precision_ms), slot_count_(slot_count) {
  // calloc: zero pages are mapped lazily, so an idle wheel costs little resident memory.
  void* mem = std::calloc(slot_count_, sizeof(TimerSlot));
  if (mem == nullptr) throw std::bad_alloc();
  slots_ = static_cast<TimerSlot*>(mem);
  dirty_.assign((slot_count_ + 63) / 64, 0);
  block_max_.assign((slot_count_ + kBlock - 1) / kBlock, -1);
}

TimerWheel::~TimerWheel() { std::free(slots_); }

absl::StatusOr<std::unique_ptr<TimerWheel>> TimerWheel::Open(FileSystem* fs, std::string path,
                                                             int64_t precision_ms,
                                                             uint64_t slot_count) {
  if (precision_ms <= 0 || slot_count == 0 || slot_count > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("timerwheel: bad precision ", precision_ms, " or slot count ", slot_count));
  }
  std::unique_ptr<TimerWheel> w(new TimerWheel(fs, std::move(path), precision_ms, slot_count));
  TOKIMQ_RETURN_IF_ERROR(w->Load());
  return w;
}

absl::Status TimerWheel::Load() {
  bool existed = fs_->Exists(path_);
  TOKIMQ_ASSIGN_OR_RETURN(file_, fs_->Open(path_, OpenMode::kReadWrite));
  uint64_t want = kHeaderSize + slot_count_ * kSlotSize;
  if (!existed || file_->Size() < kHeaderSize) {
    TOKIMQ_RETURN_IF_ERROR(file_->Truncate(0));
    TOKIMQ_RETURN_IF_ERROR(file_->PWrite(0, EncodeTimerWheelHeader(precision_ms_, slot_count_)));
    TOKIMQ_RETURN_IF_ERROR(file_->Truncate(want));
    TOKIMQ_RETURN_IF_ERROR(file_->Sync());
    return fs_->SyncDir(DirName(path_));
  }
  char hdr[kHeaderSize];
  TOKIMQ_ASSIGN_OR_RETURN(size_t n, file_->PRead(0, kHeaderSize, hdr));
  std::string expect = EncodeTimerWheelHeader(precision_ms_, slot_count_);
  if (n != kHeaderSize || DecodeFixed32(hdr + 28) != crc32c::Value(hdr, 28) ||
      DecodeFixed32(hdr) != kWheelMagic) {
    return absl::DataLossError(absl::StrCat("timerwheel: bad header in ", path_));
  }
  if (std::string_view(hdr, kHeaderSize) != expect) {
    return absl::FailedPreconditionError(absl::StrCat(
        "timerwheel: ", path_, " was created with another version, precision or slot count"));
  }
  if (file_->Size() < want) TOKIMQ_RETURN_IF_ERROR(file_->Truncate(want));
  constexpr size_t kChunkSlots = 8192;
  std::string buf(kChunkSlots * kSlotSize, '\0');
  for (uint64_t i = 0; i < slot_count_; i += kChunkSlots) {
    size_t cnt = static_cast<size_t>(std::min<uint64_t>(kChunkSlots, slot_count_ - i));
    TOKIMQ_ASSIGN_OR_RETURN(size_t got,
                            file_->PRead(kHeaderSize + i * kSlotSize, cnt * kSlotSize, buf.data()));
    if (got < cnt * kSlotSize) std::fill(buf.begin() + static_cast<long>(got), buf.end(), '\0');
    for (size_t j = 0; j < cnt; ++j) {
      TimerSlot s;
      if (!DecodeTimerSlot(buf.data() + j * kSlotSize, &s)) {
        ++corrupt_slots_;
        s = TimerSlot{};
      }
      if (s.tick >= 0 && s.count > 0) {
        slots_[i + j] = s;
        NoteTick(i + j, s.tick);
      }
    }
  }
  if (corrupt_slots_ > 0) {
    TOKIMQ_LOG_WARN("timerwheel: {} slots of {} failed their CRC", corrupt_slots_, path_);
  }
  return absl::OkStatus();
}

TimerSlot TimerWheel::Get(int64_t tick) const {
  const TimerSlot& s = slots_[Index(tick)];
  // calloc'ed memory: an untouched slot is all zero, i.e. count 0 -> empty.
  if (s.count == 0 || s.tick != tick) {
    return TimerSlot{tick, TimerLogPosition::kNone(), TimerLogPosition::kNone(), 0};
  }
  return s;
}

TimerLogPosition TimerWheel::Link(int64_t tick, TimerLogPosition pos) {
  size_t i = Index(tick);
  TimerSlot& s = slots_[i];
  TimerLogPosition prev = TimerLogPosition::kNone();
  if (s.count == 0 || s.tick != tick) {
    s = TimerSlot{tick, pos, pos, 1};
  } else {
    prev = s.last_pos;
    s.last_pos = pos;
    ++s.count;
  }
  MarkDirty(i);
  NoteTick(i, tick);
  return prev;
}

int64_t TimerWheel::NextLiveTick(int64_t from, int64_t limit) const {
  int64_t t = from;
  while (t < limit) {
    size_t i = Index(t);
    if (block_max_[i / kBlock] < t) {
      // No slot of this block holds a tick >= t: skip to the next block (or the wrap).
      size_t step = std::min(kBlock - i % kBlock, static_cast<size_t>(slot_count_ - i));
      t += static_cast<int64_t>(step);
      continue;
    }
    const TimerSlot& s = slots_[i];
    if (s.count > 0 && s.tick == t) return t;
    ++t;
  }
  return limit;
}

void TimerWheel::Reset() {
  for (uint64_t i = 0; i < slot_count_; ++i) {
    if (slots_[i].count != 0 || slots_[i].tick != 0) {
      slots_[i] = TimerSlot{0, TimerLogPosition(0), TimerLogPosition(0), 0};
      MarkDirty(i);
    }
  }
  std::fill(block_max_.begin(), block_max_.end(), -1);
}

std::vector<TimerWheel::DirtyRun> TimerWheel::TakeDirtyRuns() {
  std::vector<DirtyRun> runs;
  for (size_t w = 0; w < dirty_.size(); ++w) {
    if (dirty_[w] == 0) continue;
    // The 64-slot group as one run (at most 2 KiB).
    DirtyRun run;
    run.first_slot = w * 64;
    size_t cnt = static_cast<size_t>(std::min<uint64_t>(64, slot_count_ - run.first_slot));
    run.bytes.assign(cnt * kSlotSize, '\0');
    for (size_t j = 0; j < cnt; ++j) {
      const TimerSlot& s = slots_[run.first_slot + j];
      TimerSlot out = s.count == 0 ? TimerSlot{} : s;
      EncodeTimerSlot(out, run.bytes.data() + j * kSlotSize);
    }
    runs.push_back(std::move(run));
    dirty_[w] = 0;
  }
  return runs;
}

absl::Status TimerWheel::WriteRuns(const std::vector<DirtyRun>& runs) {
  if (runs.empty() && file_synced_) return absl::OkStatus();  // nothing written since
  for (const DirtyRun& run : runs) {
    TOKIMQ_RETURN_IF_ERROR(file_->PWrite(kHeaderSize + run.first_slot * kSlotSize, run.bytes));
  }
  TOKIMQ_RETURN_IF_ERROR(file_->Sync());
  file_synced_ = true;
  return absl::OkStatus();
}

void TimerWheel::Redirty(const std::vector<DirtyRun>& runs) {
  for (const DirtyRun& run : runs) MarkDirty(run.first_slot);  // whole 64-slot group
}

absl::Status TimerWheel::Flush() {
  std::vector<DirtyRun> runs = TakeDirtyRuns();
  absl::Status s = WriteRuns(runs);
  if (!s.ok()) Redirty(runs);
  return s;
}

}  // namespace tokimq
