#include "replication/group_state_log.h"

#include <algorithm>
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
      end_at_open_(store->MaxQueueOffset(kGroupStateTopic, 0).value()) {}

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

absl::Status GroupStateLog::AppendSnapshot() {
  // The whole state first (in memory, as the ConsumerService holds it anyway), then its parts.
  std::vector<rocksdb::WriteBatch> parts(1);
  int64_t keys = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    const std::string prefix = consumer::kKeyPrefix;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (parts.back().GetDataSize() >= kSnapshotRecordBytes) parts.emplace_back();
      parts.back().Put(it->key(), it->value());
      ++keys;
    }
    if (!it->status().ok()) {
      return absl::UnavailableError("group state snapshot: " + it->status().ToString());
    }
  }
  const auto count = static_cast<uint32_t>(parts.size());
  std::vector<std::string> bodies;
  for (uint32_t i = 0; i < count; ++i) {
    TOKIMQ_ASSIGN_OR_RETURN(std::string body,
                            EncodeGroupStateRecord(parts[i], SnapshotPart{i, count}));
    bodies.push_back(std::move(body));
  }
  int64_t first = -1;
  {
    std::lock_guard<std::mutex> l(append_mu_);
    for (std::string& body : bodies) {
      TOKIMQ_ASSIGN_OR_RETURN(PutResult put, AppendRecord(std::move(body)));
      if (first < 0) first = put.queue_offset.value();
    }
  }
  // A later rejoin replays from this snapshot: what this leader writes after it is replaced by
  // the snapshot's replay if the tail that holds it is cut.
  if (stale()) {
    TOKIMQ_LOG_ERROR(
        "replication: leading with a group state marked stale (a cut CommitLog tail's writes "
        "may be in it; no snapshot of the previous leader was replayed since the cut)");
  }
  rocksdb::WriteBatch pos;
  PutOffset(&pos, kReplayNextKey, first);
  PutOffset(&pos, kLedFromKey, first);
  pos.Delete(kStaleKey);
  rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &pos);
  if (!s.ok()) return absl::UnavailableError("group state snapshot position: " + s.ToString());
  TOKIMQ_LOG_INFO("replication: group state snapshot: {} keys in {} records from queue offset {}",
                  keys, count, first);
  return absl::OkStatus();
}

int64_t GroupStateLog::replay_next() const {
  return GetOffset(db_, kReplayNextKey).value_or(0);
}

bool GroupStateLog::stale() const {
  std::string v;
  return db_->Get(rocksdb::ReadOptions(), kStaleKey, &v).ok();
}

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
  // Records removed by retention are skipped (VisitQueue skips them). Only a replica that led
  // (and ran retention) holds a log whose queue does not start at 0: a follower copies from its
  // own end and the leader refuses offsets it no longer holds (docs/replication.md).
  next = std::max(next, store_->MinQueueOffset(kGroupStateTopic, 0).value());
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
