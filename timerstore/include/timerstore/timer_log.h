// TimerLog: append-only log of fixed-size units (72 bytes), after RocketMQ's timerlog.
//
// Each unit points to one timer-topic record in the CommitLog and to the previous unit linked
// into the same wheel slot (prev_pos), so a slot is a backward chain through the TimerLog.
// Positions are global byte offsets; segment files in `dir` are named by the 20-digit
// zero-padded position of their first byte; the segment size is a multiple of the unit size so
// a unit never spans two files. Grammar: docs/formats/timerlog.md.
//
// Ownership/threads: owned by the TimerStore. All methods are thread-safe (one internal mutex);
// units are immutable once appended. Durability: Append buffers in memory ("appended": visible
// to Read); Flush writes the buffer and fsyncs ("flushed").
// Recovery (Open): units from `validate_from` to the end are checked; a torn tail (short unit,
// bad size, CRC mismatch with no valid unit after it) is truncated; a bad unit followed by a
// valid one is kDataLoss naming the file and offset.
// Descriptors: a segment that this process has fsynced to its end, other than the last one,
// gives its descriptor up and is read through its mapping (File::ReleaseDescriptor), so the log
// holds one or two descriptors however many segments it has (issue 25). Segments are never
// deleted while the log is open, so a segment's mapping (64 MiB of address space) stays.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "common/file.h"
#include "common/offsets.h"

namespace tokimq {

// Persisted flag values: never renumbered.
enum TimerUnitFlag : uint32_t {
  kUnitNormal = 0,  // deliver at deliver_ms
  kUnitRoll = 1,    // parked: deliver_ms is beyond the window; re-link when the slot is due
  kUnitDelete = 2,  // journal of a recall: `ref` is the recalled record's physical offset
  // A bit, not a kind: the unit's record is a copy written by retention (TIMER_MOVED_FROM) of
  // a message already counted pending (docs/formats/timerlog.md). With kUnitNormal or kUnitRoll.
  kUnitMovedCopy = 0x100,
};
inline constexpr uint32_t kUnitKindMask = 0xff;
// The kind of a unit (kUnitNormal, kUnitRoll or kUnitDelete) without its bits.
inline uint32_t UnitKind(uint32_t flags) { return flags & kUnitKindMask; }

struct TimerUnit {
  uint32_t flags = kUnitNormal;
  TimerLogPosition prev_pos = TimerLogPosition::kNone();  // previous unit of the same slot
  int64_t write_ms = 0;      // when this unit was appended (ms since epoch)
  int64_t deliver_ms = 0;    // real deliver time (ms since epoch)
  int64_t slot_tick = 0;     // wheel tick this unit is linked under (-1: not linked)
  PhysicalOffset physical_offset = PhysicalOffset::kNone();  // of the timer-topic record
  // Roll continuation: the TimerLogPosition of the unit it continues; delete: the recalled
  // record's PhysicalOffset (a plain integer: which one depends on the flags).
  int64_t ref = -1;
  uint32_t msg_size = 0;     // bytes of that CommitLog record
  uint32_t topic_hash = 0;   // CRC32C of the real topic name
  uint32_t roll_count = 0;   // how many times this message has rolled so far
};

inline constexpr size_t kTimerUnitSize = 72;

// Encodes into exactly kTimerUnitSize bytes at `dst` (CRC32C over bytes 0..67 at 68).
void EncodeTimerUnit(const TimerUnit& unit, char* dst);
// kDataLoss on a bad size field or CRC mismatch.
absl::Status DecodeTimerUnit(const char* src, TimerUnit* unit);

class TimerLog {
 public:
  // `segment_size` is rounded down to a multiple of kTimerUnitSize (at least one unit).
  static absl::StatusOr<std::unique_ptr<TimerLog>> Open(FileSystem* fs, std::string dir,
                                                        uint64_t segment_size,
                                                        TimerLogPosition validate_from = {});
  ~TimerLog();

  // Appends a unit; returns its position. The unit is buffered and written out later: a failed
  // write-out (e.g. disk full) keeps it buffered and is retried by later calls, and is reported
  // by Flush/WriteOut, not here. Errors (nothing appended): the buffer holds 16 MiB that still
  // cannot be written.
  absl::StatusOr<TimerLogPosition> Append(const TimerUnit& unit);
  // Reads the unit at `pos` (appended or flushed). kOutOfRange past the end, kNotFound below
  // the first stored segment, kDataLoss on CRC mismatch, kInvalidArgument if not unit-aligned.
  absl::StatusOr<TimerUnit> Read(TimerLogPosition pos) const;
  // Writes buffered units and fsyncs them.
  absl::Status Flush();
  // Flush in two steps: WriteOut hands the buffered units to the OS and returns the end of
  // what is written; SyncTo(end) fsyncs up to `end` without holding the log's lock during the
  // fsync (Append and Read proceed meanwhile).
  absl::StatusOr<TimerLogPosition> WriteOut();
  absl::Status SyncTo(TimerLogPosition end);

  TimerLogPosition WritePos() const;    // end of appended units
  TimerLogPosition FlushedPos() const;  // end of the fsynced prefix
  TimerLogPosition MinPos() const;      // first position still stored
  uint64_t segment_size() const { return segment_size_; }
  int64_t truncated_bytes() const { return truncated_bytes_; }

 private:
  TimerLog(FileSystem* fs, std::string dir, uint64_t segment_size)
      : fs_(fs), dir_(std::move(dir)), segment_size_(segment_size) {}
  absl::Status Recover(TimerLogPosition validate_from);
  absl::Status WriteBufferLocked();
  absl::StatusOr<File*> SegmentLocked(int64_t base, bool create);
  absl::Status ReadRawLocked(TimerLogPosition pos, char* buf) const;
  std::string SegmentPath(int64_t base) const;

  FileSystem* fs_;
  const std::string dir_;
  const uint64_t segment_size_;
  mutable std::mutex mu_;
  std::map<int64_t, std::unique_ptr<File>> segments_;  // base -> file
  std::string buffer_;       // appended, not yet written: positions [written_pos_, write_pos_)
  TimerLogPosition written_pos_;  // handed to the OS
  TimerLogPosition write_pos_;
  TimerLogPosition flushed_pos_;
  int64_t truncated_bytes_ = 0;
  bool write_failing_ = false;  // the last write-out failed (logged once per state change)
  int64_t released_below_ = 0;  // segments below this base have released their descriptor; mu_
};

}  // namespace tokimq
