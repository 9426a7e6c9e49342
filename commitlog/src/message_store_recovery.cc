// MessageStoreImpl recovery: load the ConsumeQueues found on disk, drop the entries written
// after the last dispatch checkpoint (they may be torn), and re-dispatch the CommitLog from
// that checkpoint. docs/formats/consumequeue.md, docs/operations.md "Checkpoints".
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "commitlog/record.h"
#include "common/logging.h"
#include "common/names.h"
#include "message_store_impl.h"
#include "offset_file.h"

namespace tokimq {

// The looser rule puts followed before the name rule (1..255 of [A-Za-z0-9_%|.-], not "." or
// ".."), so queues written by older brokers (say a retry topic of a group the name rule now
// refuses) stay readable.
bool LoadableQueueDir(const std::string& topic) {
  if (topic.empty() || topic.size() > kMaxDestinationBytes || topic == "." || topic == "..") {
    return false;
  }
  for (char c : topic) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '%' || c == '|' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Entries pointing at or past `start` (the rescan point) were written after the last
// checkpoint and may be torn or missing: drop them; the rescan re-adds them.
absl::Status MessageStoreImpl::DropSuspectTail(ConsumeQueue* cq, PhysicalOffset start) {
  const PhysicalOffset log_end = log_->MaxOffset();
  QueueOffset keep = cq->MaxOffset();
  const QueueOffset min = cq->MinOffset();
  while (keep > min) {
    const QueueOffset from = std::max(min, keep - 1024);
    TOKIMQ_ASSIGN_OR_RETURN(auto entries, cq->Entries(from, static_cast<size_t>(keep - from)));
    bool stop = false;
    for (size_t i = entries.size(); i > 0; --i) {
      const auto& e = entries[i - 1];
      if (e.physical_offset >= start || e.size < record::kMinMessageSize ||
          e.physical_offset + e.size > log_end) {
        --keep;
      } else {
        stop = true;
        break;
      }
    }
    if (stop) break;
  }
  return cq->TruncateTo(keep);
}

// Re-dispatches every indexed record from `start` to the CommitLog end; returns how many.
absl::StatusOr<int64_t> MessageStoreImpl::Redispatch(
    int64_t start, int64_t limit,
    std::vector<std::tuple<std::string, int32_t, QueueOffset>>* touched) {
  const int64_t log_max = limit >= 0 ? limit : log_->MaxOffset().value();
  int64_t off = start, redispatched = 0;
  while (off < log_max) {
    TOKIMQ_ASSIGN_OR_RETURN(auto rec, log_->ReadNext(PhysicalOffset(off)));
    const Message& m = rec.first;
    if ((m.flags & kFlagIndexed) != 0 && LoadableQueueDir(m.topic) && m.queue_id >= 0) {
      TOKIMQ_ASSIGN_OR_RETURN(auto cq, FindOrCreate(m.topic, m.queue_id));
      if (m.queue_offset > cq->MaxOffset() && cq->MinValidOffset() >= cq->MaxOffset() &&
          log_->MinOffset() > PhysicalOffset(0)) {
        // A log copied from the middle of a leader's (docs/replication.md "A follower behind
        // the leader's retention"): the queue's first record here carries the leader's queue
        // offset, and the entries before it were removed with the leader's old segments.
        TOKIMQ_LOG_INFO("consume queue {}/{} starts at queue offset {} (record at offset {}: "
                        "the CommitLog starts at {})",
                        m.topic, m.queue_id, m.queue_offset.value(), m.physical_offset.value(),
                        log_->MinOffset().value());
        TOKIMQ_RETURN_IF_ERROR(cq->StartAt(m.queue_offset));
      }
      if (m.queue_offset != cq->MaxOffset()) {
        return absl::DataLossError(
            absl::StrCat("record at offset ", m.physical_offset.value(), " has queue offset ",
                         m.queue_offset.value(), " but consume queue ", m.topic, "/", m.queue_id,
                         " continues at ", cq->MaxOffset().value(),
                         "; consume queue data below the checkpoint is missing"));
      }
      TOKIMQ_RETURN_IF_ERROR(
          cq->Append({m.physical_offset, static_cast<uint32_t>(rec.second - m.physical_offset),
                      TagHashOf(m)}));
      ++redispatched;
      if (touched != nullptr) touched->emplace_back(m.topic, m.queue_id, m.queue_offset);
    }
    off = rec.second.value();
  }
  return redispatched;
}

absl::StatusOr<PhysicalOffset> MessageStoreImpl::AppendReplicated(const ReplicaChunk& chunk) {
  std::vector<std::tuple<std::string, int32_t, QueueOffset>> touched;
  PhysicalOffset end;
  {
    std::lock_guard<std::mutex> l(put_mu_);
    if (closed_) return absl::FailedPreconditionError("message store is closed");
    const int64_t start = log_->MaxOffset().value();
    TOKIMQ_ASSIGN_OR_RETURN(end, log_->AppendChunk(chunk));
    // A chunk ending with a blank record moves the end to the next segment; nothing starts
    // after the blank.
    PhysicalOffset records_end = chunk.offset + static_cast<int64_t>(chunk.bytes.size());
    if (end != records_end) records_end -= static_cast<int64_t>(record::kBlankSize);
    TOKIMQ_RETURN_IF_ERROR(Redispatch(start, records_end.value(), &touched).status());
  }
  if (listener_) {
    for (const auto& [topic, queue_id, queue_offset] : touched) listener_(topic, queue_id, queue_offset);
  }
  return end;
}

absl::Status MessageStoreImpl::RecoverQueues() {
  const std::string root = opt_.dir + "/consumequeue";
  TOKIMQ_RETURN_IF_ERROR(fs_->CreateDirs(root));
  const int64_t log_min = log_->MinOffset().value(), log_max = log_->MaxOffset().value();
  int64_t start = log_min;
  auto cp = ReadOffsetFile(fs_, opt_.dir + "/checkpoint", kStoreCheckpointMagic);
  if (cp.ok()) {
    start = std::clamp(*cp, log_min, log_max);
  } else if (!absl::IsNotFound(cp.status())) {
    TOKIMQ_LOG_WARN("store checkpoint unreadable, rebuilding queues from {}: {}", log_min,
                    cp.status().ToString());
  }
  TOKIMQ_ASSIGN_OR_RETURN(auto topics, cq_files_.ListDir(root));
  for (const std::string& topic : topics) {
    if (!LoadableQueueDir(topic)) continue;
    TOKIMQ_ASSIGN_OR_RETURN(auto ids, cq_files_.ListDir(root + "/" + topic));
    for (const std::string& id : ids) {
      if (id.empty() || id.size() > 9 ||
          !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        continue;
      }
      TOKIMQ_ASSIGN_OR_RETURN(auto cq, FindOrCreate(topic, std::stoi(id)));
      TOKIMQ_RETURN_IF_ERROR(DropSuspectTail(cq.get(), PhysicalOffset(start)));
    }
  }
  TOKIMQ_ASSIGN_OR_RETURN(int64_t redispatched, Redispatch(start));
  if (redispatched > 0) {
    TOKIMQ_LOG_INFO("message store {}: re-dispatched {} records from offset {}", opt_.dir,
                    redispatched, start);
  }
  for (const auto& cq : AllQueues()) TOKIMQ_RETURN_IF_ERROR(cq->AdvanceMinValid(PhysicalOffset(log_min)));
  return Checkpoint();
}

}  // namespace tokimq
