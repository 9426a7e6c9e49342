// GroupStateLog: consumer-group state through the replicated CommitLog (issue 20 item 1,
// docs/replication.md "Consumer-group state", record format docs/formats/group-state-record.md).
//
// Leader: every group-state write batch of the ConsumerService is appended, before RocksDB
// sees it, as one record of the system topic kGroupStateTopic (Append, called under the
// queue's Progress lock, so records of one queue are in the order of its RocksDB writes); at
// the start of serving the whole group state is appended once more (AppendSnapshot: what was
// written before, e.g. the receipt-handle secret created at the first open, reaches followers).
// Follower: every record copied into its CommitLog is replayed into its own RocksDB (CatchUp,
// called from the dispatch of each replicated chunk), each record in one write batch together
// with the queue offset of the next record to replay (key kReplayNextKey), so a crash between
// two records neither loses nor repeats a partial record. A snapshot REPLACES the replica's
// group state: its parts are replayed together, in one batch that first deletes every "group/"
// key. Promotion: a last CatchUp, then the ConsumerService reloads its in-memory state from the
// replayed keys (ReloadState).
//
// Rejoin (docs/replication.md "Group state at a rejoin"): a leader's snapshot sets the replay
// position to its own first part (kLedFromKey too), so a replica that led and rejoins replays
// from its own snapshot, which drops whatever its cut tail wrote. At the first CatchUp after
// the open, a replay position past the group-state queue's end, or an own snapshot that is no
// longer in the log, marks the state stale (kStaleKey, a warning) and moves the position to the
// queue's end: the next snapshot replayed (the new leader's, which its term starts with)
// replaces the stale state and clears the mark; records at the reused queue offsets are
// replayed, none skipped.
//
// Retention (docs/replication.md "A follower behind the leader's retention"): from its first
// snapshot on, a leader pins the CommitLog segment holding its last snapshot from retention
// (a pin provider), and a retention hook moves that snapshot ahead when its segment expires:
// the snapshot and every group-state record after it are folded in queue order (exactly what a
// follower replaying them holds) into a new snapshot appended at the head. So the leader's
// retained log always holds a whole snapshot, and a follower that starts its CommitLog at the
// leader's oldest segment replays it and is no longer stale.
//
// Not durable by itself: the record is appended without waiting for fsync (group-state writes
// are not fsynced either, consumer_service_impl.h "Durability"); in sync replication the broker
// answers the request only once a follower holds the record (Broker::AwaitStateReplicated).
//
// Owned by the Broker, created only when replication is configured (single-node brokers write
// no records: they would cost an extra CommitLog append per ack for nobody). Thread-safety:
// every method may be called from any thread; CatchUp calls are serialised internally.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "commitlog/message_store.h"
#include "common/clock.h"

namespace rocksdb {
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace tokimq::broker {

// RocksDB key of the replay position: the group-state queue offset of the next record to
// replay (a group-state offset value, docs/formats/group-state.md). Outside "group/", so no
// record can write it.
inline constexpr char kReplayNextKey[] = "replication/group_state_next";
// Written by a leader's AppendSnapshot: the queue offset of its snapshot's first part (offset
// value). Deleted when a snapshot is replayed.
inline constexpr char kLedFromKey[] = "replication/group_state_led_from";
// Present (offset value: the queue end when it was set) while this replica's "group/" keys may
// hold writes of a CommitLog tail that was cut: set at the first CatchUp after the open,
// deleted when a snapshot is replayed.
inline constexpr char kStaleKey[] = "replication/group_state_stale";

// Group-state records hold at most this many bytes of operations (AppendSnapshot splits).
inline constexpr size_t kSnapshotRecordBytes = 256u << 10;

class GroupStateLog {
 public:
  // `store` is open: its group-state queue end is read now (see end_at_open_).
  GroupStateLog(MessageStore* store, rocksdb::DB* db, Clock* clock);
  ~GroupStateLog();
  GroupStateLog(const GroupStateLog&) = delete;
  GroupStateLog& operator=(const GroupStateLog&) = delete;

  // Leader: appends `batch` (puts and deletes of "group/..." keys) as one record. Errors: the
  // encoder's kInvalidArgument (a batch with other operations), the store's Put errors.
  absl::Status Append(const rocksdb::WriteBatch& batch);
  // Leader, before serving (no other group-state write may run meanwhile: Append waits): appends
  // every "group/" key of `db` as puts, in snapshot parts (SnapshotPart) of at most
  // kSnapshotRecordBytes each (one part, with no put, for an empty state), consecutive in the
  // queue; then sets the replay position and kLedFromKey to the first part's queue offset and
  // deletes kStaleKey (logged as an error when it was set: this leader serves a state that may
  // hold writes of a cut tail). The first call also registers the snapshot's retention pin and
  // hook (class comment). Errors as Append; RocksDB errors as kUnavailable.
  absl::Status AppendSnapshot();
  // Leader (the retention hook calls it when the last snapshot's segment expired): appends a
  // new snapshot folded from the last one and the records after it (class comment), and moves
  // the replay position, kLedFromKey and the pin to it. Nothing is written unless this replica
  // leads (SetLeading(true) and the write check). Errors: kDataLoss (a record that does not
  // decode, a record missing in the queue), Append's errors; the old snapshot then stays pinned.
  absl::Status CompactSnapshot();
  // Whether this replica may write now (ReplicationService::Leads); CompactSnapshot writes
  // nothing otherwise. Set once, before AppendSnapshot.
  void SetWriteCheck(std::function<bool()> leads) { may_write_ = std::move(leads); }
  // Queue / CommitLog offset of the first part of the last snapshot this replica wrote (-1 /
  // INT64_MAX before any).
  int64_t snapshot_queue_offset() const { return snapshot_queue_.load(); }
  int64_t snapshot_physical_offset() const { return snapshot_physical_.load(); }

  // Follower: replays every record from the replay position to the end of the group-state
  // queue. A snapshot is replayed when all its parts are in the queue (the position waits at
  // its first part until then); a snapshot whose parts are not all there, consecutive, is
  // abandoned (its writer stopped): skipped, as is a part met without its first. The first call
  // also checks the position against the queue (stale state, see the class comment). No-op
  // once SetLeading(true). Errors: kDataLoss (a record that does not decode; the position
  // stays before it), kUnavailable (RocksDB).
  absl::Status CatchUp();
  // true: this replica leads and writes group state itself; CatchUp stops replaying (the
  // leader's own records are already in its RocksDB).
  void SetLeading(bool leading) { leading_.store(leading); }
  // The queue offset of the next record CatchUp replays (0 before any).
  int64_t replay_next() const;
  // Whether kStaleKey is set (see the class comment).
  bool stale() const;
  // Follower: runs the stale check of the first CatchUp now if no CatchUp ran it yet (its
  // inputs do not change before that replay, so the answer is the one CatchUp would reach),
  // then stale(). For the election and a promote, which ask before any record of a new leader
  // was copied. Errors: kUnavailable (RocksDB).
  absl::StatusOr<bool> CheckStale();

 private:
  struct Replayed;
  absl::Status CatchUpLocked();
  // Once per open, before the first replay: the stale-state check of the class comment, against
  // the queue's end when the store opened (records copied since must not hide the cut).
  absl::Status CheckAfterOpen(int64_t end);
  // Replays the snapshot whose first part is recs[0]; `end` is the queue end. Sets *next.
  absl::Status ReplaySnapshot(const Replayed& first, int64_t end, int64_t* next);
  // One write: `batch` plus the replay position `next` (and the snapshot keys cleared).
  absl::Status WriteReplayed(rocksdb::WriteBatch* batch, int64_t next, bool snapshot);
  absl::StatusOr<PutResult> AppendRecord(std::string body);
  // Appends `bodies` consecutively (append_mu_ held); returns the first one's result.
  absl::StatusOr<PutResult> AppendBodiesLocked(std::vector<std::string> bodies);
  // After a snapshot whose first part is `first`: replay position and kLedFromKey to it,
  // kStaleKey deleted, the pin moved to it; logged with `why`.
  absl::Status SnapshotWritten(const PutResult& first, size_t keys, size_t parts,
                               const char* why);
  // Registers the pin provider and retention hook (once).
  void KeepSnapshotRetained();
  // Folds the records [*next, end) into *state (a part 0 clears it first); *next ends at end.
  absl::Status FoldRecords(int64_t end, int64_t* next,
                           std::map<std::string, std::string>* state) const;

  MessageStore* const store_;
  rocksdb::DB* const db_;
  Clock* const clock_;
  // The group-state queue's end at construction: right after the stores opened, before any
  // replicated chunk (the broker creates this object before the follower pulls).
  const int64_t end_at_open_;
  std::atomic<bool> leading_{false};
  mutable std::mutex replay_mu_;  // serialises CatchUp
  bool checked_ = false;          // CheckAfterOpen ran; guarded by replay_mu_
  // Held around each record's append, and around a whole snapshot: a snapshot's parts are
  // consecutive in the queue. Lock order: replay_mu_ is never held with it.
  std::mutex append_mu_;
  // kReplayNextKey and kStaleKey as last written: read from RocksDB at construction only and
  // updated after each successful write of them. The metadata DB has a vector memtable
  // (broker/src/broker.cc OpenMetadataDb), where every Get copies and sorts the whole memtable:
  // reading these keys per replayed chunk and per group_status poll made an empty replica's
  // catch-up superlinear (2026-12-02: 7 MB of log in 13 s at the 10th kill of FailoverTest).
  std::atomic<int64_t> replay_next_{0};
  std::atomic<bool> stale_{false};
  std::atomic<int64_t> snapshot_queue_{-1};
  std::atomic<int64_t> snapshot_physical_{std::numeric_limits<int64_t>::max()};
  std::function<bool()> may_write_;  // set before AppendSnapshot; read-only afterwards
  struct RetentionCell;
  std::shared_ptr<RetentionCell> cell_;  // set by KeepSnapshotRetained (serving thread)
};

}  // namespace tokimq::broker
