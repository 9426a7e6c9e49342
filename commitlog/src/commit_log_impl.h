// CommitLogImpl: the CommitLog behind the public interface (see commitlog/commit_log.h for the
// contract). Private to the commitlog component; MessageStore uses the extra methods below.
//
// Locking: write_mu_ serialises appends and rolls; seg_mu_ (shared) guards the segment map so
// readers can pin a segment (shared_ptr) and pread without holding any lock; sync_mu_ guards the
// async-mode flush state (one leader fsyncs, followers wait on sync_cv_); in kSync the
// GroupCommit's sync thread runs every fsync round instead (group_commit_). Lock order:
// write_mu_ -> seg_mu_; sync_mu_ is never held while taking another lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "commitlog/commit_log.h"
#include "commitlog/group_commit.h"
#include "commitlog/record.h"

namespace tokimq {

struct Segment {
  int64_t base = 0;
  std::string path;
  std::unique_ptr<File> file;
};

class CommitLogImpl final : public CommitLog {
 public:
  static absl::StatusOr<std::unique_ptr<CommitLogImpl>> OpenImpl(FileSystem* fs, Clock* clock,
                                                                 CommitLogOptions options,
                                                                 CommitLogRecoveryInfo* info);
  ~CommitLogImpl() override;

  absl::StatusOr<PhysicalOffset> Append(Message* msg) override;
  absl::Status AppendBatch(std::span<Message* const> msgs) override;
  // AppendBatch that sets kFlagIndexed (MessageStore) instead of clearing it. When `sizes` is
  // set it receives each record's size in bytes (EncodedSize), in the order of `msgs`.
  absl::Status AppendIndexed(std::span<Message* const> msgs,
                             std::vector<uint32_t>* sizes = nullptr);
  absl::StatusOr<Message> Read(PhysicalOffset physical_offset) const override;
  absl::StatusOr<std::pair<Message, PhysicalOffset>> ReadNext(
      PhysicalOffset physical_offset) const override;
  absl::Status WaitDurable(PhysicalOffset end_offset) override;
  void WhenDurable(PhysicalOffset end_offset, DurableCallback done) override;
  absl::Status Flush() override;
  CommitLogSyncStats sync_stats() const override;
  PhysicalOffset MinOffset() const override {
    return PhysicalOffset(min_offset_.load(std::memory_order_acquire));
  }
  PhysicalOffset MaxOffset() const override {
    return PhysicalOffset(max_offset_.load(std::memory_order_acquire));
  }
  PhysicalOffset FlushedOffset() const override {
    return PhysicalOffset(flushed_.load(std::memory_order_acquire));
  }
  absl::StatusOr<int> DeleteExpiredSegments(int64_t retention_ms,
                                            PhysicalOffset pinned_min_offset) override;
  absl::StatusOr<PhysicalOffset> ExpiredEnd(int64_t retention_ms) const override;
  absl::StatusOr<int64_t> SegmentStoreMs(PhysicalOffset physical_offset) const override;
  absl::Status Close() override;
  // commit_log_replica.cc
  absl::StatusOr<ReplicaChunk> ReadChunk(PhysicalOffset from, size_t max_bytes) const override;
  absl::StatusOr<PhysicalOffset> AppendChunk(const ReplicaChunk& chunk) override;

  // Reads `len` bytes at `physical_offset` (all inside one segment and below MaxOffset) into
  // `out`. Used by MessageStore to read runs of adjacent records with one pread.
  absl::Status ReadRaw(PhysicalOffset physical_offset, size_t len, std::string* out) const;
  // The same bytes without a system call or a copy where the file system can map files: a view
  // into the segment's read mapping, with *keep holding the segment (and so the mapping) alive
  // while the view is used; else they are read into *scratch and the view points there. Errors
  // as ReadRaw. (RocketMQ reads its CommitLog through mapped files too; a pread per run of
  // records was the largest single cost of timer dequeue and consumption under load.)
  absl::StatusOr<std::string_view> ReadSpan(PhysicalOffset physical_offset, size_t len,
                                            std::string* scratch,
                                            std::shared_ptr<const Segment>* keep) const;
  // Decodes a record read by ReadRaw and checks it starts at `physical_offset`.
  absl::Status DecodeAt(std::string_view rec, PhysicalOffset physical_offset, Message* out) const;
  // The same for a view (record::DecodeView) into `rec`.
  absl::Status DecodeViewAt(std::string_view rec, PhysicalOffset physical_offset,
                            record::RecordView* out) const;
  // The error mapping both share: kDataLoss naming offset and file, or kInvalidArgument if no
  // record starts at `physical_offset`.
  absl::Status CheckDecoded(absl::Status decoded, PhysicalOffset stored_offset,
                            PhysicalOffset physical_offset) const;
  int64_t segment_size() const { return static_cast<int64_t>(opt_.segment_size); }
  const std::string& SegmentPathFor(int64_t offset) const;

 private:
  CommitLogImpl(FileSystem* fs, Clock* clock, CommitLogOptions options);

  absl::Status Recover(CommitLogRecoveryInfo* info);
  // Recovery steps (commit_log_recovery.cc): open every segment file of the directory;
  // find the end of the log by scanning from the segment holding the checkpoint `ckpt`
  // (-1: none) after an unclean shutdown; cut the log at `end`, inside segment `it` (at
  // `rel_end`, unless the segment is `missing`), removing every later segment.
  absl::Status LoadSegments();
  absl::StatusOr<int64_t> ScanForEnd(int64_t ckpt, CommitLogRecoveryInfo* info);
  absl::Status CutLogAt(std::map<int64_t, std::shared_ptr<Segment>>::iterator it, bool missing,
                        uint64_t rel_end, int64_t end, CommitLogRecoveryInfo* info);
  // Scans one segment from `from` (relative). Sets *end to the first byte after the last good
  // record (relative); *finished when a blank record or an exactly full segment closes it.
  // Returns OK, or kDataLoss when a bad record is followed by a valid one in this segment.
  enum class ScanEnd { kEof, kFinished, kBad };
  absl::Status ScanSegment(const Segment& seg, uint64_t from, uint64_t* end, ScanEnd* how,
                           int64_t* records) const;
  // True if a valid record (or blank) starts anywhere in [from, size) of `seg`.
  bool HasValidRecordAfter(const Segment& seg, uint64_t from) const;

  // Validates `msgs` and computes their record sizes into *sizes, then AppendLocked.
  absl::Status AppendChecked(std::span<Message* const> msgs, bool indexed,
                             std::vector<uint32_t>* sizes);
  // sizes[i] == msgs[i]->EncodedSize().
  absl::Status AppendLocked(std::span<Message* const> msgs, std::span<const uint32_t> sizes);
  absl::Status RollLocked(int64_t* pos);
  // After a write of AppendLocked failed with `s`: kResourceExhausted (ENOSPC, EDQUOT) undoes
  // the partial append and returns kResourceExhausted with the log still open; anything else
  // (or a failed undo) fails the log. `records` is the size of the refused batch.
  absl::Status OnAppendFailedLocked(const absl::Status& s, size_t records);
  // Cuts the segment holding `end` back to it (truncate + fdatasync) and removes segments at
  // or after it.
  absl::Status UndoAppendLocked(int64_t end);
  absl::Status FailedStatus() const;
  void Fail(const absl::Status& s);
  absl::Status SyncTo(int64_t target);
  // One flush round: fdatasync of the segments holding [from, to), the recovery checkpoint when
  // `to` entered a new segment, then FlushedOffset = to; on error the log fails. Rounds never
  // overlap (SyncTo's leader role, or the GroupCommit).
  absl::Status SyncRound(int64_t from, int64_t to);
  // kSync: starts the group commit (after recovery set flushed_).
  void StartGroupCommit();
  absl::Status SyncRange(int64_t from, int64_t to);
  std::shared_ptr<Segment> FindSegment(int64_t offset) const;
  // The segment holding [physical_offset, +len): kNotFound when deleted, kInvalidArgument when
  // the range leaves its segment or passes MaxOffset. ReadRaw and ReadSpan.
  absl::StatusOr<std::shared_ptr<Segment>> SegmentForRange(int64_t physical_offset,
                                                           size_t len) const;
  absl::StatusOr<std::shared_ptr<Segment>> CreateSegment(int64_t base);
  // Releases the descriptor of every segment that is complete and fsynced (below FlushedOffset
  // and not the last): reads then go through its mapping (File::ReleaseDescriptor), so the log
  // holds descriptors for the active segment and the ones not yet flushed, not one per
  // retained GiB (issue 25). Called after a roll and after recovery.
  void ReleaseSealedSegments();
  absl::StatusOr<int64_t> FirstStoreMs(const Segment& seg) const;
  void FlusherLoop();

  FileSystem* fs_;
  Clock* clock_;
  CommitLogOptions opt_;
  std::string checkpoint_path_;
  std::string clean_marker_path_;

  mutable std::shared_mutex seg_mu_;
  std::map<int64_t, std::shared_ptr<Segment>> segments_;  // by base offset

  std::mutex write_mu_;
  std::string encode_buf_;      // guarded by write_mu_
  int64_t write_pos_ = 0;       // guarded by write_mu_
  int64_t released_below_ = 0;  // segments below this base released; write_mu_ or recovery
  bool closed_ = false;         // guarded by write_mu_
  // The last append ran out of space (set and cleared under write_mu_; read anywhere).
  std::atomic<bool> no_space_{false};
  std::atomic<int64_t> max_offset_{0};
  std::atomic<int64_t> min_offset_{0};
  std::atomic<int64_t> flushed_{0};

  mutable std::mutex fail_mu_;
  absl::Status failed_;  // guarded by fail_mu_
  std::atomic<bool> has_failed_{false};

  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  bool sync_running_ = false;        // guarded by sync_mu_
  int64_t checkpoint_segment_ = -1;  // guarded by the sync leader role

  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stop_flusher_ = false;  // guarded by flusher_mu_
  std::thread flusher_;

  std::atomic<int64_t> segment_syncs_{0};
  // kSync only; reset first in the destructor (its thread calls SyncRound).
  std::unique_ptr<GroupCommit> group_commit_;
};

}  // namespace tokimq
