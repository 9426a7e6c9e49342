// ConsumerServiceImpl: lease expiry. Ending a lease without an ack (a retry copy, a DLQ copy,
// or a FIFO entry parked in place), the due entries of the expiry index, and the index's
// rebuild from the live leases.
#include <algorithm>
#include <set>

#include "common/logging.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"
#include "consumer/backoff_policy.h"
#include "rocksdb/write_batch.h"

namespace tokimq::consumer {

std::vector<BlockLease> ConsumerServiceImpl::Followers(const Progress* p, int64_t offset) {
  std::vector<BlockLease> out;
  const LeaseRecord& lease = p->leases.at(offset);
  if (!p->fifo || lease.msg_group.empty()) return out;
  const std::set<int64_t>* entries = p->fifo_index.Entries(lease.msg_group);
  if (entries == nullptr) return out;
  for (auto it = entries->upper_bound(offset); it != entries->end(); ++it) {
    LeaseRecord back = p->leases.at(*it);
    if (back.parked) continue;  // already waiting behind the group
    // Back behind the group (no redelivery time of its own: it follows its predecessor); the
    // epoch moves on so its receipt handle is stale; the attempt is not counted, since this
    // message was not what failed.
    back.parked = true;
    back.epoch += 1;
    back.invisible_until_ms = 0;
    out.emplace_back(*it, std::move(back));
  }
  return out;
}

absl::Status ConsumerServiceImpl::EndLease(Progress* p, int64_t offset,
                                           std::optional<int64_t> delay_ms,
                                           rocksdb::WriteBatch* batch) {
  const QueueKey& k = p->key;
  const LeaseRecord lease = p->leases.at(offset);
  const GroupPolicy policy = PolicyOf(k.group);
  const int64_t now = clock_->NowMs();
  // FIFO batches (ReceiveRequest::max_per_group): the later leased messages of the group go
  // back with this one, in order (docs/ordering.md "Batches per message group").
  std::vector<BlockLease> followers = Followers(p, offset);
  auto park_followers = [&] {
    for (auto& [off, back] : followers) p->SetLease(off, std::move(back));
    GetGroup(k.group)->in_flight.fetch_sub(static_cast<int64_t>(followers.size()));
  };

  TOKIMQ_ASSIGN_OR_RETURN(std::vector<Message> msgs,
                          store_->ReadQueue(k.read_topic, k.queue_id, QueueOffset(offset), 1));
  if (msgs.empty() || msgs[0].queue_offset != QueueOffset(offset)) {
    TOKIMQ_LOG_WARN("consumer: leased message {}/{}@{} is gone (retention); dropping lease",
                    k.read_topic, k.queue_id, offset);
  } else {
    const int64_t first_store = FirstStoreMs(msgs[0]);
    const bool too_old = policy.ttl_ms > 0 && now - first_store >= policy.ttl_ms;
    const bool exhausted = static_cast<int64_t>(lease.attempt) >= policy.max_attempts;
    if (too_old || exhausted) {
      TOKIMQ_RETURN_IF_ERROR(copies_.Put(k, std::move(msgs[0]), lease.attempt, true, now));
    } else if (p->fifo) {
      // FIFO: the retry stays in place (a copy in the retry topic would let the group's later
      // messages overtake it). The entry is parked until the backoff ends and keeps its group
      // blocked; the epoch moves on so the old receipt handle is stale.
      LeaseRecord parked = lease;
      parked.parked = true;
      parked.epoch += 1;
      parked.attempt += 1;
      const int64_t delay =
          delay_ms ? *delay_ms : BackoffMs(policy, static_cast<int>(lease.attempt));
      parked.invisible_until_ms = now + delay;
      std::vector<BlockLease> replace{BlockLease{offset, parked}};
      replace.insert(replace.end(), followers.begin(), followers.end());
      StageLeases(p, {}, replace, batch);
      TOKIMQ_RETURN_IF_ERROR(WriteState(batch));
      // Wakes long polls when the redelivery is due (ExpireRange on a parked entry).
      if (delay > 0) expiries_.Add(parked.invisible_until_ms, Expiry{p, offset, offset});
      p->SetLease(offset, std::move(parked));
      park_followers();
      GetGroup(k.group)->in_flight.fetch_sub(1);
      if (delay == 0) WakeReceivers(k.topic);
      return absl::OkStatus();
    } else {
      int64_t delay = delay_ms ? *delay_ms : BackoffMs(policy, static_cast<int>(lease.attempt));
      TOKIMQ_RETURN_IF_ERROR(
          copies_.Put(k, std::move(msgs[0]), lease.attempt + 1, false, now + delay));
    }
  }
  // A crash here (copy written, lease not yet deleted) redelivers the message twice: see
  // docs/operations.md "Delivery guarantees".
  StageLeases(p, {offset}, followers, batch);
  TOKIMQ_RETURN_IF_ERROR(WriteState(batch));
  p->EraseLease(offset);
  park_followers();
  GetGroup(k.group)->in_flight.fetch_sub(1);
  // FIFO: the group's head went to the DLQ (or is gone): its next message may go out.
  if (p->fifo) WakeReceivers(k.topic);
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::ExpireRange(const Expiry& e) {
  Progress* p = e.p;
  std::lock_guard<std::mutex> lock(p->mu);
  const int64_t now = clock_->NowMs();
  std::vector<int64_t> due;
  bool wake = false;
  for (auto it = p->leases.lower_bound(e.first); it != p->leases.end() && it->first <= e.last;
       ++it) {
    const LeaseRecord& lease = it->second;
    if (lease.invisible_until_ms > now) continue;  // renewed (its own entry), or not yet
    if (lease.parked) {
      // A parked FIFO entry's redelivery time: nothing expires, receivers may take it now.
      // (Entries parked behind their group have time 0 and need no wake-up, but one is harmless.)
      wake = wake || lease.invisible_until_ms > 0;
      continue;
    }
    due.push_back(it->first);
  }
  if (wake) WakeReceivers(p->key.topic);
  for (int64_t offset : due) {
    // An earlier expiry of this range may have parked it (a follower of its message group).
    auto it = p->leases.find(offset);
    if (it == p->leases.end() || it->second.parked) continue;
    rocksdb::WriteBatch batch;
    TOKIMQ_RETURN_IF_ERROR(EndLease(p, offset, std::nullopt, &batch));
    GetGroup(p->key.group)->lease_expired.fetch_add(1);
  }
  return absl::OkStatus();
}

absl::Status ConsumerServiceImpl::RunUntilIdle() {
  absl::Status s = RunDueExpiries();
  MaybeCompactExpiries();
  return s;
}

int64_t ConsumerServiceImpl::ExpiryIndexEntries() const {
  return static_cast<int64_t>(expiries_.size());
}

absl::Status ConsumerServiceImpl::RunDueExpiries() {
  std::lock_guard<std::mutex> lock(lease_mu_);
  while (true) {
    Expiry e;
    int64_t deadline = 0;
    if (!expiries_.PopDue(clock_->NowMs(), &deadline, &e)) return absl::OkStatus();
    absl::Status s = ExpireRange(e);
    if (!s.ok()) {
      // Keep the entry: the leases not yet expired are tried again.
      expiries_.Add(deadline, e);
      return s;
    }
  }
}

void ConsumerServiceImpl::IndexLiveLeases() {
  // One entry per queue and deadline, covering the offsets that share it (a Receive's leases
  // share one). Parked FIFO entries waiting for a redelivery time get one too (it wakes long
  // polls); entries parked behind their group need none.
  std::vector<Progress*> all;
  {
    std::lock_guard<std::mutex> l(map_mu_);
    for (auto& [k, p] : progress_) all.push_back(p.get());
  }
  for (Progress* p : all) {
    std::lock_guard<std::mutex> l(p->mu);
    std::map<int64_t, std::pair<int64_t, int64_t>> ranges;  // deadline -> first, last offset
    for (const auto& [off, lease] : p->leases) {
      if (lease.parked && lease.invisible_until_ms == 0) continue;
      auto [it, fresh] = ranges.try_emplace(lease.invisible_until_ms, off, off);
      if (!fresh) it->second.second = off;  // offsets ascend
    }
    for (const auto& [deadline, range] : ranges) {
      expiries_.Add(deadline, Expiry{p, range.first, range.second});
    }
  }
}

void ConsumerServiceImpl::MaybeCompactExpiries() {
  // Entries outlive the leases they were made for (an acked or renewed lease keeps its entry
  // until the deadline, up to 12 h): with frequent renewals of long leases the index would
  // grow with calls, not with leases. Past a bound, it is rebuilt from the live leases.
  int64_t live = 0;
  {
    std::lock_guard<std::mutex> l(map_mu_);
    for (const auto& [name, g] : groups_) live += g->in_flight.load();
  }
  if (!expiries_.OverCompactionBound(live)) return;
  std::lock_guard<std::mutex> lease_lock(lease_mu_);  // no expiry runs meanwhile
  // Entries added from here on stay; the old ones are rebuilt from the live leases.
  const size_t old = expiries_.TakeAll();
  IndexLiveLeases();
  expiries_.FinishCompaction();
  TOKIMQ_LOG_INFO("consumer: lease expiry index rebuilt: {} entries -> {}", old,
                  expiries_.size());
}

}  // namespace tokimq::consumer
