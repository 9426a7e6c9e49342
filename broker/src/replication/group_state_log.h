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
// two records neither loses nor repeats a partial record. Promotion: a last CatchUp, then the
// ConsumerService reloads its in-memory state from the replayed keys (ReloadState).
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
#include <mutex>

#include "absl/status/status.h"
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

// Group-state records hold at most this many bytes of operations (AppendSnapshot splits).
inline constexpr size_t kSnapshotRecordBytes = 256u << 10;

class GroupStateLog {
 public:
  GroupStateLog(MessageStore* store, rocksdb::DB* db, Clock* clock);

  // Leader: appends `batch` (puts and deletes of "group/..." keys) as one record. Errors: the
  // encoder's kInvalidArgument (a batch with other operations), the store's Put errors.
  absl::Status Append(const rocksdb::WriteBatch& batch);
  // Leader, before serving: appends every "group/" key of `db` as puts, in records of at most
  // kSnapshotRecordBytes. Errors as Append; RocksDB read errors as kUnavailable.
  absl::Status AppendSnapshot();

  // Follower: replays every record from the replay position to the end of the group-state
  // queue. No-op once SetLeading(true). Errors: kDataLoss (a record that does not decode; the
  // position stays before it), kUnavailable (RocksDB).
  absl::Status CatchUp();
  // true: this replica leads and writes group state itself; CatchUp stops replaying (the
  // leader's own records are already in its RocksDB).
  void SetLeading(bool leading) { leading_.store(leading); }
  // The queue offset of the next record CatchUp replays (0 before any).
  int64_t replay_next() const;

 private:
  absl::Status CatchUpLocked();

  MessageStore* const store_;
  rocksdb::DB* const db_;
  Clock* const clock_;
  std::atomic<bool> leading_{false};
  mutable std::mutex replay_mu_;  // serialises CatchUp
};

}  // namespace tokimq::broker
