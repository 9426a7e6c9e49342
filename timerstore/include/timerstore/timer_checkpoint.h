// TimerCheckpoint: the small state file that says how far the timer store got, replaced
// atomically (WriteFileAtomic: temp file, fsync, rename, directory fsync) after the TimerLog and
// the wheel have been flushed, so it is never ahead of the data it describes.
// Grammar: docs/formats/timercheckpoint.md. Value type; no threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file.h"
#include "common/offsets.h"

namespace tokimq {

struct RecalledEntry {
  PhysicalOffset physical_offset;  // timer-topic record of the recalled message
  int64_t deliver_ms = 0;
};

struct TimerCheckpointData {
  int64_t precision_ms = 0;
  int64_t read_tick = 0;             // every tick below this is fully delivered and durable
  TimerLogPosition timerlog_flush_pos;  // TimerLog prefix reflected in the counters below
  TimerLogPosition timerlog_scan_from;  // where read_tick's walk began
  QueueOffset enqueue_queue_offset;  // next timer-topic queue offset for enqueue
  // Highest timer-topic physical offset in the TimerLog (kNone: none yet).
  PhysicalOffset last_enqueued_physical_offset = PhysicalOffset::kNone();
  PhysicalOffset commitlog_scan_from;  // CommitLog offset before the first put of read_tick
  int64_t pending = 0;               // pending messages as of read_tick (counted before delivery)
  // CommitLog bucket (physical offset / 4 MiB: an index, not an offset) -> pending units
  // pointing into it.
  std::map<int64_t, int64_t> pins;
  std::vector<RecalledEntry> recalled;

  std::string Encode() const;
  // kDataLoss on bad magic, version, length or CRC.
  static absl::StatusOr<TimerCheckpointData> Decode(std::string_view in);
};

// Loads `path`; kNotFound if it does not exist.
absl::StatusOr<TimerCheckpointData> LoadTimerCheckpoint(FileSystem* fs, const std::string& path);
absl::Status StoreTimerCheckpoint(FileSystem* fs, const std::string& path,
                                  const TimerCheckpointData& data);

}  // namespace tokimq
