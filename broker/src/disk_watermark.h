// DiskWatermark: refuses producer sends before the disk holding the data dir is full, so the
// space left (the reserve) stays for the broker's own writes: timer releases, retry and DLQ
// copies, acks and group state. After RocketMQ's diskSpaceWarningLevelRatio (producers refused
// above 90 % used by default) plus a free-bytes floor.
//
// Producers are refused while
//   free - bytes_of_the_send < max(min_free_bytes, total * (1 - max_used_ratio))
// (a term is off when min_free_bytes is 0, max_used_ratio is >= 1 or the total is unknown).
// "free" is what statvfs gave at the last refresh, minus what the CommitLog grew since (an
// underestimate between refreshes, never an overestimate of what was written). A refresh
// (one statvfs) happens at most every refresh_interval_ms, or sooner once refresh_bytes were
// appended since the last one: never a system call per send.
//
// Logging: one line when producers start being refused and one when they are admitted again;
// one when a write ran out of space (NoteNoSpace) and one when the next refresh finds room.
//
// Ownership: one per Broker. Thread-safe: AdmitProducer, NoteNoSpace and Snapshot may be called
// from any thread (atomics; a refresh is done by one caller at a time under refresh_mu_, the
// others use the cached figures). Time: `clock` is the real time even when the broker runs on
// a manual clock (disk space is a real-world quantity).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/file.h"

namespace tokimq::broker {

struct DiskWatermarkOptions {
  std::string path;              // a directory on the file system to watch (the data dir)
  uint64_t min_free_bytes = 0;   // refuse producers below this many free bytes; 0 = off
  double max_used_ratio = 0.90;  // refuse producers above this used fraction; >= 1 = off
  int64_t refresh_interval_ms = 1000;
  uint64_t refresh_bytes = 64u << 20;
};

// Persisted nowhere; the numbers are those of StatsResponse.disk_state (docs/protocol.md).
enum class DiskState {
  kOk = 0,              // producers admitted
  kAboveWatermark = 1,  // producers refused; the broker's own writes go on
  kFull = 2,            // a write ran out of space since the last refresh (or free is 0)
};

const char* DiskStateName(DiskState s);

class DiskWatermark {
 public:
  // `appended_bytes` returns a counter of bytes written since start (the CommitLog end): the
  // free-space estimate between refreshes subtracts its growth.
  DiskWatermark(FileSystem* fs, Clock* clock, DiskWatermarkOptions options,
                std::function<int64_t()> appended_bytes);

  // OK, or kResourceExhausted ("disk usage above watermark: ...") when a producer send of
  // `bytes` (its bodies and headers, roughly) must be refused. Counts refusals.
  absl::Status AdmitProducer(uint64_t bytes);
  // A write failed for lack of space (ENOSPC/EDQUOT): state kFull, producers refused, until a
  // refresh (on its usual schedule) finds at least max(threshold, 4 MiB) free.
  void NoteNoSpace();
  // OK, or kResourceExhausted ("no room for group state: ...") when a write of `bytes` by the
  // broker itself to its metadata store (RocksDB: receives, acks, leases) would leave fewer than
  // kOwnWriteFloorBytes free. RocksDB's WAL writer aborts the process on a write that runs out
  // of space (Debian's 7.8 keeps its assertions; acks on a disk another process filled abort
  // the broker), so those writes are refused before the disk is full instead.
  // The bytes count (twice: WAL, then table file) towards the free estimate until the next
  // refresh; below the floor the disk is asked again at once, so a freed disk is seen at once.
  absl::Status AdmitOwnWrite(uint64_t bytes);
  static constexpr uint64_t kOwnWriteFloorBytes = 4u << 20;
  // Forces a statvfs now (tests, start-up).
  void Refresh();

  struct Snapshot {
    uint64_t free_bytes = 0;       // at the last refresh
    uint64_t total_bytes = 0;      // 0: unknown
    uint64_t threshold_bytes = 0;  // producers refused below this free estimate
    DiskState state = DiskState::kOk;
    int64_t sends_refused = 0;    // since start
    int64_t no_space_errors = 0;  // NoteNoSpace calls since start
  };
  Snapshot snapshot() const;

 private:
  // Refreshes when due (or `force`); returns the current free-space estimate.
  uint64_t FreeEstimate(bool force);
  // Bytes written since start: the CommitLog's (appended_bytes_) and the metadata store's.
  int64_t Appended() const {
    return appended_bytes_() + own_bytes_.load(std::memory_order_relaxed);
  }
  void RefreshLocked();
  uint64_t ThresholdFor(uint64_t total) const;
  void SetState(DiskState s);

  FileSystem* fs_;
  Clock* clock_;
  const DiskWatermarkOptions opt_;
  std::function<int64_t()> appended_bytes_;

  std::mutex refresh_mu_;  // one statvfs at a time
  std::atomic<uint64_t> free_bytes_{0};
  std::atomic<uint64_t> total_bytes_{0};
  std::atomic<int64_t> appended_at_refresh_{0};
  std::atomic<int64_t> refreshed_ms_{INT64_MIN / 2};
  std::atomic<bool> refresh_now_{true};  // the first AdmitProducer refreshes
  std::atomic<int> state_{static_cast<int>(DiskState::kOk)};
  std::atomic<int64_t> sends_refused_{0};
  std::atomic<int64_t> no_space_errors_{0};
  std::atomic<int64_t> own_bytes_{0};  // AdmitOwnWrite bytes admitted (x2), since start
};

}  // namespace tokimq::broker
