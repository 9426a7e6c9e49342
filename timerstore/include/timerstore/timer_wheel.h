// TimerWheel: 2 x slots_total slots of {tick, first_pos, last_pos, count}, after RocketMQ's
// timerwheel. A tick is floor(ms / precision_ms); slot index = tick mod slot_count. A slot whose
// stored tick differs from the requested one belongs to an old lap and reads as empty.
//
// Kept in memory (32 bytes per slot, allocated once with calloc so untouched pages cost no RSS)
// and persisted to one file: a 32-byte header (magic, version, precision, slot count, CRC) then
// one 32-byte record per slot, each with its own CRC32C (docs/formats/timerwheel.md). Flush
// writes only the slots changed since the last flush, then fsyncs; with no slot changed (and
// the file synced once since it was opened) it makes no system call at all (issue 21 item 1:
// the 1 s checkpoint of an idle wheel fsynced the unchanged file every time).
//
// Thread-safety: none; the TimerStore serialises access with its state mutex. Durability: the
// file may be ahead of the checkpoint (flushed after it) but never behind it: the TimerStore
// flushes TimerLog, then wheel, then checkpoint, and recovery re-links idempotently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file.h"
#include "common/offsets.h"

namespace tokimq {

struct TimerSlot {
  int64_t tick = -1;
  TimerLogPosition first_pos = TimerLogPosition::kNone();
  TimerLogPosition last_pos = TimerLogPosition::kNone();
  uint32_t count = 0;
};

class TimerWheel {
 public:
  static constexpr size_t kHeaderSize = 32;
  static constexpr size_t kSlotSize = 32;

  // Opens or creates the wheel file. kFailedPrecondition if the file was made with another
  // precision or slot count. Slots failing their CRC are counted in corrupt_slots() and read
  // as empty: the caller must then rebuild from the TimerLog.
  static absl::StatusOr<std::unique_ptr<TimerWheel>> Open(FileSystem* fs, std::string path,
                                                          int64_t precision_ms,
                                                          uint64_t slot_count);
  ~TimerWheel();
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  // The slot of `tick`; empty {tick, -1, -1, 0} if the stored slot is of another lap.
  TimerSlot Get(int64_t tick) const;
  // Links the unit at `pos` as the newest of `tick`'s slot; returns the previous last_pos (-1).
  TimerLogPosition Link(int64_t tick, TimerLogPosition pos);
  // First tick in [from, limit) whose slot may hold that tick (limit if none). Skips whole
  // blocks of slots with a per-block maximum linked tick, so walking a long idle stretch (days
  // of downtime) costs about one check per kBlock ticks.
  int64_t NextLiveTick(int64_t from, int64_t limit) const;
  // Clears every slot (rebuild).
  void Reset();
  absl::Status Flush();  // WriteRuns(TakeDirtyRuns())

  // Flush in two steps so the caller can do the fsync outside its lock: TakeDirtyRuns encodes
  // the slots changed since the last call (a snapshot; clears their dirty marks; in memory
  // only), WriteRuns writes such a snapshot and fsyncs. WriteRuns only touches the file: it may
  // run concurrently with Get/Link, but not with another WriteRuns/Flush. If it fails, hand the
  // runs to Redirty (under the caller's lock) so the next flush writes them again. WriteRuns
  // of no runs fsyncs only if the file was never synced since Open (its size may be unsynced).
  struct DirtyRun {
    size_t first_slot = 0;
    std::string bytes;  // encoded slots
  };
  std::vector<DirtyRun> TakeDirtyRuns();
  absl::Status WriteRuns(const std::vector<DirtyRun>& runs);
  void Redirty(const std::vector<DirtyRun>& runs);

  int64_t precision_ms() const { return precision_ms_; }
  uint64_t slot_count() const { return slot_count_; }
  int64_t corrupt_slots() const { return corrupt_slots_; }

 private:
  TimerWheel(FileSystem* fs, std::string path, int64_t precision_ms, uint64_t slot_count);
  size_t Index(int64_t tick) const {
    return static_cast<size_t>(static_cast<uint64_t>(tick) % slot_count_);
  }
  static constexpr size_t kBlock = 256;
  void NoteTick(size_t i, int64_t tick) {
    int64_t& m = block_max_[i / kBlock];
    if (tick > m) m = tick;
  }
  void MarkDirty(size_t i) { dirty_[i / 64] |= uint64_t{1} << (i % 64); }
  absl::Status Load();

  FileSystem* fs_;
  std::string path_;
  int64_t precision_ms_;
  uint64_t slot_count_;
  TimerSlot* slots_ = nullptr;  // calloc'ed; all-zero bytes decode as "empty"
  std::vector<uint64_t> dirty_;
  std::vector<int64_t> block_max_;  // per kBlock slots: highest tick linked there (-1: none)
  std::unique_ptr<File> file_;
  bool file_synced_ = false;  // a Sync succeeded since Open (WriteRuns only)
  int64_t corrupt_slots_ = 0;
};

// Encoding helpers, exposed for format tests.
std::string EncodeTimerWheelHeader(int64_t precision_ms, uint64_t slot_count);
void EncodeTimerSlot(const TimerSlot& slot, char* dst);
// false on CRC mismatch; an all-zero record is a valid empty slot.
bool DecodeTimerSlot(const char* src, TimerSlot* slot);

}  // namespace tokimq
