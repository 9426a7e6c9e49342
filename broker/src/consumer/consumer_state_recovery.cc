// ConsumerServiceImpl::Recover: consumer state from the group-state records on open. Loads the
// handle secret (created once), policies, progress and leases; drops what points past the end
// of a store whose tail a crash lost; gives every live lease an expiry entry again.
#include <random>

#include "common/logging.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"
#include "rocksdb/iterator.h"
#include "rocksdb/write_batch.h"

namespace tokimq::consumer {

absl::Status ConsumerServiceImpl::Recover() {
  TOKIMQ_RETURN_IF_ERROR(LoadHandleSecret());
  TOKIMQ_RETURN_IF_ERROR(LoadGroupState());
  TOKIMQ_RETURN_IF_ERROR(ReconcileWithStore());
  // The expiry index is in memory: every live lease gets an entry again.
  IndexLiveLeases();
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::ReloadState() {
  // Progress objects stay (pointers to them are never invalidated); their contents go.
  std::lock_guard<std::mutex> expiry(lease_mu_);
  std::vector<Progress*> all;
  {
    std::lock_guard<std::mutex> l(map_mu_);
    for (auto& [k, p] : progress_) all.push_back(p.get());
    for (auto& [g, state] : groups_) state->in_flight.store(0);
  }
  for (Progress* p : all) {
    std::lock_guard<std::mutex> l(p->mu);
    p->leases.clear();
    p->fifo_index.Clear();
    p->consume_offset = -1;
  }
  expiries_.TakeAll();
  TOKIMQ_RETURN_IF_ERROR(Recover());
  expiries_.FinishCompaction();
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::LoadHandleSecret() {
  // Handle secret: created once, so handles stay valid across restarts.
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), kHandleSecretKey, &value);
  if (s.IsNotFound()) {
    std::random_device rd;
    secret_ = (uint64_t{rd()} << 32) ^ rd();
    rocksdb::WriteBatch batch;
    batch.Put(kHandleSecretKey, EncodeSecretValue(kHandleSecretKey, secret_));
    TOKIMQ_RETURN_IF_ERROR(WriteSynced(&batch));
  } else if (!s.ok()) {
    return absl::UnavailableError("group state read failed: " + s.ToString());
  } else {
    TOKIMQ_ASSIGN_OR_RETURN(secret_, DecodeSecretValue(kHandleSecretKey, value));
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::LoadGroupState() {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  const std::string prefix = kKeyPrefix;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    std::string_view key(it->key().data(), it->key().size());
    std::string_view val(it->value().data(), it->value().size());
    std::optional<ParsedKey> pk = ParseKey(key);
    if (!pk) {
      TOKIMQ_LOG_WARN("consumer: ignoring unknown group-state key {}", std::string(key));
      continue;
    }
    switch (pk->kind) {
      case ParsedKey::kHandleSecret:
        break;
      case ParsedKey::kCommittedOffset:
        // Offset-based consumption: read on demand (Broker::HandleGetOffset), nothing in memory.
        break;
      case ParsedKey::kLeaseTopicOffset:
        // Written by older brokers that expired leases through marker messages; ignored.
        break;
      case ParsedKey::kPolicy: {
        TOKIMQ_ASSIGN_OR_RETURN(GroupPolicy policy, DecodePolicyValue(key, val));
        GetGroup(pk->queue.group)->policy = std::move(policy);
        break;
      }
      case ParsedKey::kProgress: {
        TOKIMQ_ASSIGN_OR_RETURN(int64_t off, DecodeOffsetValue(key, val));
        GetProgress(pk->queue)->consume_offset = off;
        break;
      }
      case ParsedKey::kLease: {
        TOKIMQ_ASSIGN_OR_RETURN(LeaseRecord lease, DecodeLeaseValue(key, val));
        lease.block = kLegacyLeaseKey;
        GetProgress(pk->queue)->SetLease(pk->queue_offset, lease);
        GetGroup(pk->queue.group)->in_flight.fetch_add(1);
        break;
      }
      case ParsedKey::kLeaseBlock: {
        TOKIMQ_ASSIGN_OR_RETURN(std::vector<BlockLease> leases, DecodeLeaseBlockValue(key, val));
        if (leases.front().first < pk->queue_offset) {
          return absl::DataLossError("group state: lease block entry below its key " +
                                     std::string(key));
        }
        Progress* p = GetProgress(pk->queue);
        int64_t live = 0;
        for (auto& [offset, lease] : leases) {
          lease.block = pk->queue_offset;
          if (!lease.parked) ++live;
          p->SetLease(offset, std::move(lease));
        }
        GetGroup(pk->queue.group)->in_flight.fetch_add(live);
        break;
      }
    }
  }
  if (!it->status().ok()) {
    return absl::UnavailableError("group state scan failed: " + it->status().ToString());
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::ReconcileWithStore() {
  // Reconcile with the store: if its tail was lost in a crash, offsets at/after its end will be
  // assigned to new messages, so neither progress nor leases may point there.
  rocksdb::WriteBatch fix;
  std::vector<Progress*> all;
  {
    std::lock_guard<std::mutex> l(map_mu_);
    for (auto& [k, p] : progress_) all.push_back(p.get());
  }
  for (Progress* p : all) {
    int64_t max = store_->MaxQueueOffset(p->key.read_topic, p->key.queue_id).value();
    std::vector<int64_t> gone;
    for (auto it2 = p->leases.lower_bound(max); it2 != p->leases.end(); ++it2) {
      TOKIMQ_LOG_WARN("consumer: dropping lease past queue end {}/{} offset {}",
                      p->key.read_topic, p->key.queue_id, it2->first);
      gone.push_back(it2->first);
    }
    if (!gone.empty()) {
      StageLeases(p, gone, {}, &fix);
      int64_t live = 0;
      for (auto it2 = p->leases.lower_bound(max); it2 != p->leases.end(); ++it2) {
        if (!it2->second.parked) ++live;
      }
      for (int64_t offset : gone) p->EraseLease(offset);
      GetGroup(p->key.group)->in_flight.fetch_sub(live);
    }
    if (p->consume_offset < 0 && !p->leases.empty()) {
      p->consume_offset = p->leases.rbegin()->first + 1;
    }
    if (p->consume_offset > max) {
      TOKIMQ_LOG_WARN("consumer: consume offset {} past queue end {} for {}/{}; clamping",
                      p->consume_offset, max, p->key.read_topic, p->key.queue_id);
      p->consume_offset = max;
      fix.Put(ProgressKey(p->key), EncodeOffsetValue(ProgressKey(p->key), max));
    }
  }
  if (fix.Count() > 0) TOKIMQ_RETURN_IF_ERROR(WriteSynced(&fix));
  return absl::OkStatus();
}

}  // namespace tokimq::consumer
