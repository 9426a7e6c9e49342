#include "replication/group_state_log.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/status.h"
#include "consumer/group_state.h"
#include "fmt/format.h"
#include "replication/group_state_record.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace tokimq::broker {
namespace {

// Records replayed per read of the group-state queue.
constexpr int kReplayChunk = 64;

std::optional<int64_t> GetOffset(rocksdb::DB* db, const char* key) {
  std::string v;
  if (!db->Get(rocksdb::ReadOptions(), key, &v).ok()) return std::nullopt;
  absl::StatusOr<int64_t> o = consumer::DecodeOffsetValue(key, v);
  if (!o.ok()) return std::nullopt;
  return *o;
}

void PutOffset(rocksdb::WriteBatch* b, const char* key, int64_t offset) {
  b->Put(key, consumer::EncodeOffsetValue(key, offset));
}

absl::Status DataLoss(const absl::Status& d, PhysicalOffset at) {
  return absl::DataLossError(
      fmt::format("{} (record at CommitLog offset {})", std::string(d.message()), at.value()));
}

}  // namespace

// One group-state record read back from the queue.
struct GroupStateLog::Replayed {
  int64_t queue_offset = 0;
  PhysicalOffset physical_offset = PhysicalOffset::kNone();
  std::string body;
};

GroupStateLog::GroupStateLog(MessageStore* store, rocksdb::DB* db, Clock* clock)
    : store_(store),
      db_(db),
      clock_(clock),
      end_at_open_(store->MaxQueueOffset(kGroupStateTopic, 0).value()) {
  // Read once here, then kept in step with every write below (see replay_next_ in the header).
  replay_next_.store(GetOffset(db_, kReplayNextKey).value_or(0));
  std::string v;
  stale_.store(db_->Get(rocksdb::ReadOptions(), kStaleKey, &v).ok());
}

absl::StatusOr<PutResult> GroupStateLog::AppendRecord(std::string body) {
  Message m;
  m.topic = kGroupStateTopic;
  m.queue_id = 0;
  m.born_ms = clock_->NowMs();
  m.body = std::move(body);
  std::vector<Message> one;
  one.push_back(std::move(m));
  // No durability wait: the RocksDB write it precedes is not fsynced either.
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<PutResult> put, store_->PutBatchNoWait(std::move(one)));
  if (put.size() != 1) return absl::InternalError("group state: one record put, not one result");
  return put[0];
}

absl::Status GroupStateLog::Append(const rocksdb::WriteBatch& batch) {
  TOKIMQ_ASSIGN_OR_RETURN(std::string body, EncodeGroupStateRecord(batch));
  std::lock_guard<std::mutex> l(append_mu_);
  return AppendRecord(std::move(body)).status();
}

namespace {

// A snapshot's parts (SnapshotPart) of at most kSnapshotRecordBytes of puts each, from
// `state` (key order); one part with no put for an empty state.
absl::StatusOr<std::vector<std::string>> SnapshotBodies(
    const std::map<std::string, std::string>& state) {
  std::vector<rocksdb::WriteBatch> parts(1);
  for (const auto& [key, value] : state) {
    if (parts.back().GetDataSize() >= kSnapshotRecordBytes) parts.emplace_back();
    parts.back().Put(key, value);
  }
  const auto count = static_cast<uint32_t>(parts.size());
  std::vector<std::string> bodies;
  for (uint32_t i = 0; i < count; ++i) {
    TOKIMQ_ASSIGN_OR_RETURN(std::string body,
                            EncodeGroupStateRecord(parts[i], SnapshotPart{i, count}));
    bodies.push_back(std::move(body));
  }
  return bodies;
}

// Replays puts and deletes into a key -> value map (a replay into memory, for compaction).
class Folder : public rocksdb::WriteBatch::Handler {
 public:
  explicit Folder(std::map<std::string, std::string>* state) : state_(state) {}
  rocksdb::Status PutCF(uint32_t /*cf*/, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    (*state_)[key.ToString()] = value.ToString();
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t /*cf*/, const rocksdb::Slice& key) override {
    state_->erase(key.ToString());
    return rocksdb::Status::OK();
  }

 private:
  std::map<std::string, std::string>* state_;
};

}  // namespace

// The pin provider's and retention hook's view of this object: cleared by the destructor, so
// a store that outlives it never calls into a destroyed GroupStateLog.
struct GroupStateLog::RetentionCell {
  std::mutex mu;
  GroupStateLog* owner = nullptr;  // guarded by mu
};

GroupStateLog::~GroupStateLog() {
  if (cell_ != nullptr) {
    std::lock_guard<std::mutex> l(cell_->mu);
    cell_->owner = nullptr;
  }
}

absl::StatusOr<PutResult> GroupStateLog::AppendBodiesLocked(std::vector<std::string> bodies) {
  PutResult first;
  for (std::string& body : bodies) {
    TOKIMQ_ASSIGN_OR_RETURN(PutResult put, AppendRecord(std::move(body)));
    if (first.queue_offset == QueueOffset::kNone()) first = put;
  }
  return first;
}

absl::Status GroupStateLog::SnapshotWritten(const PutResult& first, size_t keys, size_t parts,
                                            const char* why) {
  rocksdb::WriteBatch pos;
  PutOffset(&pos, kReplayNextKey, first.queue_offset.value());
  PutOffset(&pos, kLedFromKey, first.queue_offset.value());
  pos.Delete(kStaleKey);
  rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &pos);
  if (!s.ok()) return absl::UnavailableError("group state snapshot position: " + s.ToString());
  replay_next_.store(first.queue_offset.value());
  stale_.store(false);
  snapshot_queue_.store(first.queue_offset.value());
  snapshot_physical_.store(first.physical_offset.value());
  TOKIMQ_LOG_INFO("replication: group state snapshot ({}): {} keys in {} records from queue "
                  "offset {} (CommitLog offset {})",
                  why, keys, parts, first.queue_offset.value(), first.physical_offset.value());
  return absl::OkStatus();
}

absl::Status GroupStateLog::AppendSnapshot() {
  // The whole state first (in memory, as the ConsumerService holds it anyway), then its parts.
  std::map<std::string, std::string> state;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    const std::string prefix = consumer::kKeyPrefix;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      state.emplace(it->key().ToString(), it->value().ToString());
    }
    if (!it->status().ok()) {
      return absl::UnavailableError("group state snapshot: " + it->status().ToString());
    }
  }
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<std::string> bodies, SnapshotBodies(state));
  const size_t parts = bodies.size();
  PutResult first;
  {
    std::lock_guard<std::mutex> l(append_mu_);
    TOKIMQ_ASSIGN_OR_RETURN(first, AppendBodiesLocked(std::move(bodies)));
  }
  // A later rejoin replays from this snapshot: what this leader writes after it is replaced by
  // the snapshot's replay if the tail that holds it is cut.
  if (stale()) {
    TOKIMQ_LOG_ERROR(
        "replication: leading with a group state marked stale (a cut CommitLog tail's writes "
        "may be in it; no snapshot of the previous leader was replayed since the cut)");
  }
  TOKIMQ_RETURN_IF_ERROR(SnapshotWritten(first, state.size(), parts, "start of term"));
  KeepSnapshotRetained();
  return absl::OkStatus();
}

void GroupStateLog::KeepSnapshotRetained() {
  if (cell_ != nullptr) return;  // once per process: a replica leads once (docs/replication.md)
  cell_ = std::make_shared<RetentionCell>();
  cell_->owner = this;
  store_->AddRemovablePinProvider([cell = cell_]() {
    std::lock_guard<std::mutex> l(cell->mu);
    if (cell->owner == nullptr) return PhysicalOffset(std::numeric_limits<int64_t>::max());
    return PhysicalOffset(cell->owner->snapshot_physical_.load());
  });
  store_->AddRetentionHook([cell = cell_](PhysicalOffset expired_end) {
    std::lock_guard<std::mutex> l(cell->mu);
    if (cell->owner == nullptr) return absl::OkStatus();
    if (PhysicalOffset(cell->owner->snapshot_physical_.load()) >= expired_end) {
      return absl::OkStatus();
    }
    absl::Status s = cell->owner->CompactSnapshot();
    if (!s.ok()) {
      TOKIMQ_LOG_ERROR("replication: group state snapshot not moved forward ({}): its segment "
                       "stays pinned from retention",
                       s.ToString());
    }
    return s;
  });
}

absl::Status GroupStateLog::FoldRecords(int64_t end, int64_t* next,
                                        std::map<std::string, std::string>* state) const {
  while (*next < end) {
    std::vector<Replayed> recs;
    TOKIMQ_RETURN_IF_ERROR(
        store_
            ->VisitQueue(kGroupStateTopic, 0, QueueOffset(*next),
                         static_cast<int>(std::min<int64_t>(end - *next, kReplayChunk)),
                         [&](const record::RecordView& v) -> absl::Status {
                           recs.push_back({v.queue_offset.value(), v.physical_offset,
                                           std::string(v.body)});
                           return absl::OkStatus();
                         })
            .status());
    if (recs.empty()) {
      return absl::DataLossError(fmt::format(
          "group state compaction: no record at queue offset {} (queue end {})", *next, end));
    }
    for (const Replayed& r : recs) {
      if (r.queue_offset >= end) break;
      rocksdb::WriteBatch ops;
      std::optional<SnapshotPart> part;
      if (absl::Status d = DecodeGroupStateRecord(r.body, &ops, &part); !d.ok()) {
        return DataLoss(d, r.physical_offset);
      }
      if (part.has_value() && part->part == 0) state->clear();  // a snapshot replaces
      Folder folder(state);
      rocksdb::Status s = ops.Iterate(&folder);
      if (!s.ok()) return absl::InternalError("group state compaction: " + s.ToString());
      *next = r.queue_offset + 1;
    }
  }
  return absl::OkStatus();
}

absl::Status GroupStateLog::CompactSnapshot() {
  const int64_t from = snapshot_queue_.load();
  if (from < 0 || !leading_.load() || (may_write_ && !may_write_())) return absl::OkStatus();
  // This leader's last snapshot and every record after it, folded in queue order: what a
  // follower that replays them holds, so the new snapshot is exactly that state (the RocksDB
  // keys are not read: a write whose record is appended may not be in RocksDB yet).
  std::map<std::string, std::string> state;
  int64_t next = from;
  TOKIMQ_RETURN_IF_ERROR(
      FoldRecords(store_->MaxQueueOffset(kGroupStateTopic, 0).value(), &next, &state));
  size_t parts = 0;
  PutResult first;
  {
    // The records appended meanwhile, then the snapshot, with no record between.
    std::lock_guard<std::mutex> l(append_mu_);
    TOKIMQ_RETURN_IF_ERROR(
        FoldRecords(store_->MaxQueueOffset(kGroupStateTopic, 0).value(), &next, &state));
    TOKIMQ_ASSIGN_OR_RETURN(std::vector<std::string> bodies, SnapshotBodies(state));
    parts = bodies.size();
    TOKIMQ_ASSIGN_OR_RETURN(first, AppendBodiesLocked(std::move(bodies)));
  }
  return SnapshotWritten(first, state.size(), parts, "moved ahead of retention");
}

int64_t GroupStateLog::replay_next() const { return replay_next_.load(); }

bool GroupStateLog::stale() const { return stale_.load(); }

absl::StatusOr<bool> GroupStateLog::CheckStale() {
  std::lock_guard<std::mutex> l(replay_mu_);
  if (!checked_) {
    TOKIMQ_RETURN_IF_ERROR(CheckAfterOpen(end_at_open_));
    checked_ = true;
  }
  return stale();
}

absl::Status GroupStateLog::CatchUp() {
  if (leading_.load()) return absl::OkStatus();
  std::lock_guard<std::mutex> l(replay_mu_);
  if (leading_.load()) return absl::OkStatus();
  return CatchUpLocked();
}

absl::Status GroupStateLog::CheckAfterOpen(int64_t end) {
  const int64_t next = replay_next();
  const int64_t min = store_->MinQueueOffset(kGroupStateTopic, 0).value();
  const std::optional<int64_t> led = GetOffset(db_, kLedFromKey);
  std::string why;
  if (next > end) {
    why = fmt::format("replay position {} is past the group-state queue's end {}", next, end);
  } else if (led.has_value() && (*led < min || *led >= end)) {
    why = fmt::format("this replica's own snapshot at queue offset {} is no longer in the log "
                      "(queue {}..{})", *led, min, end);
  }
  if (why.empty()) return absl::OkStatus();
  rocksdb::WriteBatch b;
  PutOffset(&b, kReplayNextKey, std::min(next, end));
  PutOffset(&b, kStaleKey, end);
  b.Delete(kLedFromKey);
  rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &b);
  if (!s.ok()) return absl::UnavailableError("group state replay: " + s.ToString());
  replay_next_.store(std::min(next, end));
  stale_.store(true);
  TOKIMQ_LOG_WARN("replication: group state marked stale: {}; replaying from queue offset {}, "
                  "the next snapshot replayed replaces it",
                  why, std::min(next, end));
  return absl::OkStatus();
}

absl::Status GroupStateLog::WriteReplayed(rocksdb::WriteBatch* batch, int64_t next,
                                          bool snapshot) {
  PutOffset(batch, kReplayNextKey, next);
  if (snapshot) {
    batch->Delete(kStaleKey);
    batch->Delete(kLedFromKey);
  }
  rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), batch);
  if (!s.ok()) return absl::UnavailableError("group state replay: " + s.ToString());
  replay_next_.store(next);
  if (snapshot) stale_.store(false);
  return absl::OkStatus();
}

absl::Status GroupStateLog::ReplaySnapshot(const Replayed& first, int64_t end, int64_t* next) {
  std::optional<SnapshotPart> head;
  rocksdb::WriteBatch ops;
  if (absl::Status d = DecodeGroupStateRecord(first.body, &ops, &head); !d.ok()) {
    return DataLoss(d, first.physical_offset);
  }
  const int64_t q = first.queue_offset;
  const int64_t parts = head->parts;
  if (q + parts > end) return absl::OkStatus();  // the rest is not copied yet: wait at q
  std::vector<Replayed> rest;
  if (parts > 1) {
    absl::StatusOr<size_t> n = store_->VisitQueue(
        kGroupStateTopic, 0, QueueOffset(q + 1), static_cast<int>(parts - 1),
        [&](const record::RecordView& v) -> absl::Status {
          rest.push_back({v.queue_offset.value(), v.physical_offset, std::string(v.body)});
          return absl::OkStatus();
        });
    if (!n.ok()) return n.status();
  }
  // Every part i at q + i: else its writer stopped before the end and others wrote after it.
  bool whole = static_cast<int64_t>(rest.size()) == parts - 1;
  for (size_t i = 0; whole && i < rest.size(); ++i) {
    std::optional<SnapshotPart> p;
    rocksdb::WriteBatch more;
    whole = rest[i].queue_offset == q + 1 + static_cast<int64_t>(i) &&
            DecodeGroupStateRecord(rest[i].body, &more, &p).ok() && p.has_value() &&
            *p == SnapshotPart{static_cast<uint32_t>(i + 1), head->parts};
  }
  rocksdb::WriteBatch batch;
  if (!whole) {
    TOKIMQ_LOG_WARN("replication: group state snapshot at queue offset {} is incomplete "
                    "(its leader stopped while writing it): skipped", q);
    *next = q + 1;
    return WriteReplayed(&batch, *next, false);
  }
  // Replace: every "group/" key goes, then the snapshot's puts (later in the batch, so they win).
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    const std::string prefix = consumer::kKeyPrefix;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      batch.Delete(it->key());
    }
    if (!it->status().ok()) return absl::UnavailableError("group state replay: " +
                                                          it->status().ToString());
  }
  TOKIMQ_RETURN_IF_ERROR(DecodeGroupStateRecord(first.body, &batch));
  for (const Replayed& r : rest) {
    if (absl::Status d = DecodeGroupStateRecord(r.body, &batch); !d.ok()) {
      return DataLoss(d, r.physical_offset);
    }
  }
  *next = q + parts;
  return WriteReplayed(&batch, *next, true);
}

absl::Status GroupStateLog::CatchUpLocked() {
  const int64_t end = store_->MaxQueueOffset(kGroupStateTopic, 0).value();
  if (!checked_) {
    TOKIMQ_RETURN_IF_ERROR(CheckAfterOpen(end_at_open_));
    checked_ = true;
  }
  int64_t next = replay_next();
  // Records below the queue's first offset are not in this log: removed by this replica's own
  // retention while it led, or never copied (a follower that started its CommitLog at the
  // leader's oldest segment, docs/replication.md "A follower behind the leader's retention").
  // Their writes are missing from the "group/" keys: the state is stale until a snapshot is
  // replayed (the next one replaces it and clears the mark).
  const int64_t min = store_->MinQueueOffset(kGroupStateTopic, 0).value();
  if (next < min && min < end && !stale()) {
    rocksdb::WriteBatch b;
    PutOffset(&b, kStaleKey, min);
    rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &b);
    if (!s.ok()) return absl::UnavailableError("group state replay: " + s.ToString());
    stale_.store(true);
    TOKIMQ_LOG_WARN("replication: group state marked stale: the group-state records before "
                    "queue offset {} are not in this CommitLog (replay position {}); the next "
                    "snapshot replayed replaces the state",
                    min, next);
  }
  next = std::max(next, min);
  while (next < end) {
    std::vector<Replayed> recs;
    absl::StatusOr<size_t> n = store_->VisitQueue(
        kGroupStateTopic, 0, QueueOffset(next), kReplayChunk,
        [&](const record::RecordView& v) -> absl::Status {
          recs.push_back({v.queue_offset.value(), v.physical_offset, std::string(v.body)});
          return absl::OkStatus();
        });
    if (!n.ok()) return n.status();
    if (recs.empty()) break;  // nothing readable past `next` (retention gap at the end)
    for (const Replayed& r : recs) {
      rocksdb::WriteBatch batch;
      std::optional<SnapshotPart> part;
      if (absl::Status d = DecodeGroupStateRecord(r.body, &batch, &part); !d.ok()) {
        return DataLoss(d, r.physical_offset);
      }
      if (part.has_value() && part->part == 0) {
        const int64_t before = next;
        TOKIMQ_RETURN_IF_ERROR(ReplaySnapshot(r, end, &next));
        if (next == before) return absl::OkStatus();  // waiting for the rest of the snapshot
        break;  // read again from `next`
      }
      // A part without its first (an abandoned snapshot's): skipped, like its first part.
      if (part.has_value()) batch.Clear();
      next = r.queue_offset + 1;
      TOKIMQ_RETURN_IF_ERROR(WriteReplayed(&batch, next, false));
    }
  }
  return absl::OkStatus();
}

}  // namespace tokimq::broker
