#include "replication/group_state_log.h"

#include <algorithm>
#include <memory>
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

}  // namespace

GroupStateLog::GroupStateLog(MessageStore* store, rocksdb::DB* db, Clock* clock)
    : store_(store), db_(db), clock_(clock) {}

absl::Status GroupStateLog::Append(const rocksdb::WriteBatch& batch) {
  TOKIMQ_ASSIGN_OR_RETURN(std::string body, EncodeGroupStateRecord(batch));
  Message m;
  m.topic = kGroupStateTopic;
  m.queue_id = 0;
  m.born_ms = clock_->NowMs();
  m.body = std::move(body);
  std::vector<Message> one;
  one.push_back(std::move(m));
  // No durability wait: the RocksDB write it precedes is not fsynced either.
  return store_->PutBatchNoWait(std::move(one)).status();
}

absl::Status GroupStateLog::AppendSnapshot() {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  const std::string prefix = consumer::kKeyPrefix;
  rocksdb::WriteBatch batch;
  int64_t keys = 0, records = 0;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    batch.Put(it->key(), it->value());
    ++keys;
    if (batch.GetDataSize() >= kSnapshotRecordBytes) {
      TOKIMQ_RETURN_IF_ERROR(Append(batch));
      batch.Clear();
      ++records;
    }
  }
  if (!it->status().ok()) {
    return absl::UnavailableError("group state snapshot: " + it->status().ToString());
  }
  if (batch.Count() > 0) {
    TOKIMQ_RETURN_IF_ERROR(Append(batch));
    ++records;
  }
  TOKIMQ_LOG_INFO("replication: group state snapshot: {} keys in {} records", keys, records);
  return absl::OkStatus();
}

int64_t GroupStateLog::replay_next() const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), kReplayNextKey, &v);
  if (!s.ok()) return 0;
  absl::StatusOr<int64_t> next = consumer::DecodeOffsetValue(kReplayNextKey, v);
  return next.ok() ? *next : 0;
}

absl::Status GroupStateLog::CatchUp() {
  if (leading_.load()) return absl::OkStatus();
  std::lock_guard<std::mutex> l(replay_mu_);
  if (leading_.load()) return absl::OkStatus();
  return CatchUpLocked();
}

absl::Status GroupStateLog::CatchUpLocked() {
  int64_t next = replay_next();
  const int64_t end = store_->MaxQueueOffset(kGroupStateTopic, 0).value();
  // Records removed by retention are skipped (VisitQueue skips them): a follower copies the
  // leader's CommitLog from its own end, and one that starts empty copies from the leader's
  // oldest segment; the leader's snapshot at its start covers what retention removed.
  next = std::max(next, store_->MinQueueOffset(kGroupStateTopic, 0).value());
  while (next < end) {
    absl::StatusOr<size_t> n = store_->VisitQueue(
        kGroupStateTopic, 0, QueueOffset(next), kReplayChunk,
        [&](const record::RecordView& v) -> absl::Status {
          rocksdb::WriteBatch batch;
          absl::Status d = DecodeGroupStateRecord(v.body, &batch);
          if (!d.ok()) {
            return absl::DataLossError(fmt::format("{} (record at CommitLog offset {})",
                                                   std::string(d.message()),
                                                   v.physical_offset.value()));
          }
          const int64_t after = v.queue_offset.value() + 1;
          batch.Put(kReplayNextKey, consumer::EncodeOffsetValue(kReplayNextKey, after));
          rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch);
          if (!s.ok()) return absl::UnavailableError("group state replay: " + s.ToString());
          next = after;
          return absl::OkStatus();
        });
    if (!n.ok()) return n.status();
    if (*n == 0) break;  // nothing readable past `next` (retention gap at the end)
  }
  return absl::OkStatus();
}

}  // namespace tokimq::broker
