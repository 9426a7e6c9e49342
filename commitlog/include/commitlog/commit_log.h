// CommitLog: the single append-only log of every message of a broker.
//
// Layout: fixed-size segment files in `dir`, each named by the 20-digit zero-padded physical
// offset of its first byte (00000000000000000000, 00000000001073741824, ...). A record never
// spans two segments: when the next record does not fit, the rest of the segment is filled with
// one blank (padding) record and the record goes to the next segment. Format and worked example:
// docs/formats/commitlog.md.
//
// Ownership and threads: one CommitLog per data dir, owned by MessageStore. Append/AppendBatch
// are serialised internally (one writer at a time); Read may run concurrently from any thread.
// Flush policy:
//   kAsync: Append returns once the bytes are handed to the OS ("appended"); a background
//           flusher (or Flush()) fsyncs every async_flush_interval_ms.
//   kSync:  WaitDurable(end) blocks until an fsync covering `end` has returned ("flushed");
//           WhenDurable(end, done) answers the same on the log's sync thread without blocking.
//           A dedicated sync thread runs the rounds: one fdatasync acknowledges every wait
//           queued before it, from any number of threads (group commit, commitlog/group_commit.h).
// After a failed fsync or a failed write the log is failed: that call and every later Append,
// Flush and WaitDurable return an error; nothing after the last successful fsync is reported
// durable. Reopen to recover. Except a write that fails for lack of space (ENOSPC, EDQUOT:
// kResourceExhausted from the File): the append is undone (the segment is cut back to the end
// of the last good record and fdatasynced, segments it created are removed), the call returns
// kResourceExhausted and the log stays open, so appends succeed again once space is freed and
// no record of the refused batch becomes visible, then or after a restart. The first refusal
// and the first success after it are logged (once per state change).
//
// Recovery (Open): after a clean Close (shutdown marker present and matching the files) nothing
// is scanned. Otherwise segments are scanned from the start of the segment holding the last
// checkpointed durable offset (from the first segment when there is no valid checkpoint); bytes
// before it are trusted at open and verified by CRC when read. A torn last record (short, bad
// length, CRC mismatch with nothing valid after it) is truncated; a bad record followed by a
// valid record is corruption: Open fails with kDataLoss naming the segment file and offset.
// Descriptors: a segment that is complete and below the flushed offset gives its descriptor up
// after the next roll (and at open) and is read through its mapping (File::ReleaseDescriptor):
// the log holds descriptors for the active segment and those not yet flushed, not one per
// retained segment (issue 25). File systems that cannot map keep one descriptor per segment.
// Destroying a CommitLog without Close() stops the flusher but neither flushes nor writes the
// marker: the next Open treats it as a crash (crash tests rely on this).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "commitlog/message.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/offsets.h"

namespace tokimq {

enum class FlushMode { kAsync, kSync };

struct CommitLogOptions {
  std::string dir;                              // created if missing
  uint64_t segment_size = uint64_t{1} << 30;    // bytes; tests use a few KiB
  uint32_t max_message_size = 4u << 20;         // bytes of body; larger is kInvalidArgument
  FlushMode flush_mode = FlushMode::kAsync;
  int64_t async_flush_interval_ms = 500;        // kAsync only; 0 = no background flusher
};

// Durability counters of a CommitLog since it was opened (exact; any thread may read them).
struct CommitLogSyncStats {
  int64_t segment_syncs = 0;  // fdatasync calls on segment files (every flush mode)
  int64_t rounds = 0;         // kSync: group-commit rounds that synced (one fsync per segment)
  int64_t durable_waits = 0;  // kSync: WaitDurable / WhenDurable calls answered OK
};

// A run of whole records of a CommitLog, byte for byte, as replication ships it from a leader
// to a follower (issue 20, docs/replication.md): `bytes` is the log's content at
// [offset, offset + bytes.size()), inside one segment. A chunk that ends with a blank record
// closes its segment: the next chunk starts at the next segment's base offset.
struct ReplicaChunk {
  PhysicalOffset offset;  // of the chunk's first byte (a record boundary)
  std::string bytes;
};

struct CommitLogRecoveryInfo {
  bool clean_shutdown = false;
  int64_t truncated_bytes = 0;  // torn tail removed
  int64_t records_scanned = 0;
};

class CommitLog {
 public:
  static absl::StatusOr<std::unique_ptr<CommitLog>> Open(FileSystem* fs, Clock* clock,
                                                         CommitLogOptions options,
                                                         CommitLogRecoveryInfo* info = nullptr);
  virtual ~CommitLog() = default;

  // Appends one record; sets msg->physical_offset and msg->store_ms. Errors:
  // kInvalidArgument (body > max_message_size, encoded record > segment size, or both
  // properties and encoded_properties set),
  // kResourceExhausted (disk full: nothing stored, the log stays usable), kInternal (I/O, or
  // the log already failed).
  virtual absl::StatusOr<PhysicalOffset> Append(Message* msg) = 0;
  // Appends several records contiguously (may roll segments between them). All-or-nothing from
  // the caller's view: on error none of them is reported appended.
  virtual absl::Status AppendBatch(std::span<Message* const> msgs) = 0;

  // Reads the record at `physical_offset`. kNotFound if the offset is below MinOffset (deleted
  // by retention) or at/after MaxOffset; kDataLoss if the bytes there fail their checksum;
  // kInvalidArgument if the offset is not the start of a record.
  virtual absl::StatusOr<Message> Read(PhysicalOffset physical_offset) const = 0;
  // Reads the record at `physical_offset` and returns it with the offset of the next record
  // (skipping padding to the next segment). Used by dispatch and recovery scans.
  virtual absl::StatusOr<std::pair<Message, PhysicalOffset>> ReadNext(
      PhysicalOffset physical_offset) const = 0;

  // Blocks until every byte below `end_offset` is fsynced (kSync group commit; in kAsync it
  // forces a flush). Error if the log failed.
  virtual absl::Status WaitDurable(PhysicalOffset end_offset) = 0;
  // The same answer as WaitDurable(end_offset), without blocking: done(OK) once an fsync
  // covering every byte below `end_offset` has returned OK, done(error) if that fsync failed or
  // the log failed earlier (then nothing after the last good fsync is ever answered OK). kSync:
  // done runs on the log's sync thread (or inline on the caller when the answer is known at
  // once); it must be short (hand the answer to another thread) and must not call WaitDurable,
  // Flush or Close. kAsync: flushes on the caller and calls done inline. `end_offset` must not
  // exceed MaxOffset() at the call. Thread-safe.
  using DurableCallback = absl::AnyInvocable<void(absl::Status) &&>;
  virtual void WhenDurable(PhysicalOffset end_offset, DurableCallback done) = 0;
  // fsyncs everything appended so far.
  virtual absl::Status Flush() = 0;
  virtual CommitLogSyncStats sync_stats() const = 0;

  virtual PhysicalOffset MinOffset() const = 0;      // first byte still stored (retention moves it)
  virtual PhysicalOffset MaxOffset() const = 0;      // end of the last appended record
  virtual PhysicalOffset FlushedOffset() const = 0;  // end of the durable prefix

  // Deletes whole segments whose newest record is older than now - retention_ms, oldest first,
  // never the active segment and never a segment containing or after `pinned_min_offset`
  // (pass PhysicalOffset(INT64_MAX) when nothing is pinned). Returns the number of segments
  // deleted. The age of a segment is the store time of the first record of the segment after
  // it (an upper bound of its newest record that needs no scan).
  virtual absl::StatusOr<int> DeleteExpiredSegments(int64_t retention_ms,
                                                    PhysicalOffset pinned_min_offset) = 0;
  // The end of the expired prefix: the base offset of the first segment that
  // DeleteExpiredSegments(retention_ms, PhysicalOffset(INT64_MAX)) would keep (MinOffset()
  // when none is expired). Everything below it is due for deletion. Same age rule as
  // DeleteExpiredSegments.
  // Errors: reading a segment's first record failed (I/O, checksum).
  virtual absl::StatusOr<PhysicalOffset> ExpiredEnd(int64_t retention_ms) const = 0;
  // Store time (ms since epoch) of the first record of the segment holding `physical_offset`:
  // the age of the data at that offset, to a segment. kNotFound below MinOffset or at/after
  // MaxOffset.
  virtual absl::StatusOr<int64_t> SegmentStoreMs(PhysicalOffset physical_offset) const = 0;

  // Replication (issue 20, docs/replication.md). The default implementations return
  // kUnimplemented.
  //
  // Leader side: whole records from `from` on, at most `max_bytes` of them unless the first
  // record alone is larger (then exactly that record), never past the end of from's segment or
  // MaxOffset. `from` must be a record boundary of this log (the end offset a follower reports).
  // A `from` with less than a blank record of room left in its segment reads from the next
  // segment. Empty chunk (offset = from) when nothing is there yet. Errors: kNotFound below
  // MinOffset (deleted by retention), kOutOfRange above MaxOffset (the follower holds bytes
  // this log does not: it diverged), kDataLoss / kInvalidArgument when no valid record starts
  // at `from`. Thread-safe; runs concurrently with appends.
  virtual absl::StatusOr<ReplicaChunk> ReadChunk(PhysicalOffset from, size_t max_bytes) const;
  // Follower side: appends a chunk read from the leader's log, byte for byte, after checking
  // every record (CRC32C, the physical offset stored in each record equals its position, no
  // record crosses its segment, a blank record covers exactly the rest of its segment and ends
  // the chunk). chunk.offset must be MaxOffset(), or the next segment's base when less than a
  // blank record of room is left. Nothing is written when a check fails: kDataLoss (bad record)
  // or kFailedPrecondition (wrong offset). Write errors as Append. Serialised with Append.
  // Returns the new MaxOffset (the next segment's base after a blank record).
  virtual absl::StatusOr<PhysicalOffset> AppendChunk(const ReplicaChunk& chunk);
  // Rejoin (issue 20, docs/replication.md "Rejoin"): offline, before Open, cuts the log whose
  // files are in `dir` at `end` (bytes; a record boundary the leader's log shares): removes
  // the segment files at or past it, truncates the one holding it, lowers the durability
  // checkpoint to it and removes the clean-shutdown marker, so Open's recovery ends the log at
  // `end` (and MessageStore recovery drops the ConsumeQueue entries past it). Returns the bytes
  // removed (0: the log already ended at or before `end`). Errors: file I/O.
  static absl::StatusOr<int64_t> TruncateFiles(FileSystem* fs, const std::string& dir,
                                               int64_t segment_size, PhysicalOffset end);

  // Flushes, writes the clean-shutdown marker and stops the flusher. Idempotent.
  virtual absl::Status Close() = 0;
};

}  // namespace tokimq
