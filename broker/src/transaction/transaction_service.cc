#include "transaction/transaction_service.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "common/clock.h"
#include "common/logging.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "fmt/format.h"
#include "timerstore/timer_store.h"
#include "transaction/transaction_op.h"

namespace tokimq::broker {

absl::StatusOr<std::unique_ptr<TransactionService>> TransactionService::Open(
    Clock* clock, MessageStore* store, TimerStore* timers, TransactionOptions options) {
  std::unique_ptr<TransactionService> s(
      new TransactionService(clock, store, timers, std::move(options)));
  TOKIMQ_RETURN_IF_ERROR(s->Recover());
  TOKIMQ_RETURN_IF_ERROR(s->RecoverCopies());
  TransactionService* raw = s.get();
  s->pin_id_ = store->AddRemovablePinProvider([raw]() -> PhysicalOffset {
    std::lock_guard<std::mutex> lock(raw->mu_);
    return PhysicalOffset(raw->pending_phys_.empty() ? INT64_MAX : *raw->pending_phys_.begin());
  });
  return s;
}

TransactionService::TransactionService(Clock* clock, MessageStore* store, TimerStore* timers,
                                       TransactionOptions options)
    : clock_(clock), store_(store), timers_(timers), options_(std::move(options)) {
  std::random_device rd;
  tx_salt_ = (uint64_t{rd()} << 32) | rd();
}

TransactionService::~TransactionService() {
  Stop();
  if (pin_id_ != 0) store_->RemovePinProvider(pin_id_);
}

std::string TransactionService::NextTransactionId() {
  return fmt::format("{:016X}{:08X}", tx_salt_, tx_counter_.fetch_add(1) + 1);
}

absl::StatusOr<std::vector<HalfPutResult>> TransactionService::Put(std::vector<HalfToPut> halves) {
  std::vector<Message> msgs;
  std::vector<Pending> infos;
  std::vector<std::string> ids;
  msgs.reserve(halves.size());
  for (HalfToPut& h : halves) {
    Pending p;
    p.topic = h.msg.topic;
    p.transaction_id = NextTransactionId();
    p.checks = 0;
    Message m = std::move(h.msg);
    m.properties[prop::kRealTopic] = m.topic;
    m.properties[prop::kRealQueueId] = std::to_string(m.queue_id);
    m.properties[prop::kTransactionId] = p.transaction_id;
    m.properties[prop::kTxImmunityMs] = std::to_string(h.immunity_ms);
    if (h.deliver_ms > 0) m.properties[prop::kTxDeliverMs] = std::to_string(h.deliver_ms);
    m.topic = kHalfTopic;
    m.queue_id = 0;
    ids.push_back(m.properties.at(prop::kMessageId));
    p.next_check_ms = h.immunity_ms;  // made absolute below, from the store time
    infos.push_back(std::move(p));
    msgs.push_back(std::move(m));
  }
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<PutResult> puts, store_->PutBatch(std::move(msgs)));
  const int64_t now = clock_->NowMs();
  std::vector<HalfPutResult> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < puts.size() && i < infos.size(); ++i) {
    Pending& p = infos[i];
    p.phys = puts[i].physical_offset.value();
    p.size = puts[i].size;
    p.store_ms = now;
    p.next_check_ms = now + p.next_check_ms;
    out.push_back({puts[i], p.transaction_id});
    pending_phys_.insert(p.phys);
    pending_[ids[i]] = std::move(p);
  }
  return out;
}

absl::Status TransactionService::End(const std::string& topic, const std::string& message_id,
                                     const std::string& transaction_id, TxOutcome outcome,
                                     bool from_check) {
  Pending p;
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      auto it = pending_.find(message_id);
      if (it == pending_.end()) {
        auto e = ended_.find(message_id);
        if (e == ended_.end() || e->second.transaction_id != transaction_id ||
            e->second.topic != topic) {
          return absl::NotFoundError(fmt::format(
              "no transaction {} for message {} of topic '{}'", transaction_id, message_id, topic));
        }
        if (e->second.outcome == outcome) return absl::OkStatus();  // a retried End
        return absl::FailedPreconditionError(
            fmt::format("transaction {} already ended: {}", transaction_id,
                        TxOutcomeName(e->second.outcome)));
      }
      if (it->second.transaction_id != transaction_id || it->second.topic != topic) {
        return absl::NotFoundError(fmt::format(
            "no transaction {} for message {} of topic '{}'", transaction_id, message_id, topic));
      }
      if (it->second.copy_written && outcome != TxOutcome::kCommit) {
        return absl::FailedPreconditionError(
            fmt::format("transaction {} is being committed", transaction_id));
      }
      if (!it->second.ending) {
        it->second.ending = true;
        p = it->second;
        break;
      }
      ended_cv_.wait(lock);
    }
  }
  absl::Status s;
  bool copy_written = p.copy_written;
  if (outcome == TxOutcome::kCommit && !copy_written) {
    absl::StatusOr<Message> half = store_->Read(PhysicalOffset(p.phys));
    s = half.ok() ? WriteCommitCopy(p, *half) : half.status();
    copy_written = s.ok();
  }
  if (s.ok()) s = WriteOp(p.phys, message_id, p, outcome, from_check ? "check" : "client");
  std::lock_guard<std::mutex> lock(mu_);
  if (s.ok()) {
    FinishLocked(message_id, outcome);
  } else {
    // Nothing or only the commit copy is stored: the half stays pending; a retried commit
    // writes only the op record (and recovery would find the copy).
    auto it = pending_.find(message_id);
    if (it != pending_.end()) {
      it->second.ending = false;
      it->second.copy_written = copy_written;
    }
  }
  ended_cv_.notify_all();
  return s;
}

absl::Status TransactionService::WriteCommitCopy(const Pending& p, const Message& half) {
  Message m = half;
  m.topic = p.topic;
  int64_t qid = 0;
  auto q = m.properties.find(prop::kRealQueueId);
  if (q != m.properties.end()) ParseInt64(q->second, &qid);
  m.queue_id = static_cast<int32_t>(qid);
  int64_t deliver_ms = 0;
  auto d = m.properties.find(prop::kTxDeliverMs);
  if (d != m.properties.end()) ParseInt64(d->second, &deliver_ms);
  for (const char* k : {prop::kRealTopic, prop::kRealQueueId, prop::kTxDeliverMs,
                        prop::kTxImmunityMs}) {
    m.properties.erase(k);
  }
  m.properties[prop::kTxHalfOffset] = std::to_string(p.phys);
  m.queue_offset = QueueOffset::kNone();
  m.physical_offset = PhysicalOffset::kNone();
  m.flags = kFlagNone;
  std::vector<ScheduleItem> items;
  items.push_back({std::move(m), std::max(deliver_ms, clock_->NowMs())});
  return timers_->ScheduleBatch(std::move(items)).status();
}

absl::Status TransactionService::WriteOp(int64_t half_phys, const std::string& message_id,
                                         const Pending& p, TxOutcome outcome,
                                         const char* source) {
  Message op = MakeOpRecord(half_phys, message_id, p.topic, p.transaction_id, outcome, source);
  op.born_ms = clock_->NowMs();
  return store_->Put(std::move(op)).status();
}

void TransactionService::FinishLocked(const std::string& message_id, TxOutcome outcome) {
  auto it = pending_.find(message_id);
  if (it == pending_.end()) return;
  switch (outcome) {
    case TxOutcome::kCommit: ++counters_.commits; break;
    case TxOutcome::kRollback: ++counters_.rollbacks; break;
    case TxOutcome::kUnresolved: ++counters_.moved_unresolved; break;
  }
  pending_phys_.erase(it->second.phys);
  RememberEndedLocked(message_id, {it->second.topic, it->second.transaction_id, outcome});
  pending_.erase(it);
}

void TransactionService::RememberEndedLocked(const std::string& message_id, Ended e) {
  if (ended_.insert_or_assign(message_id, std::move(e)).second) ended_order_.push_back(message_id);
  while (ended_order_.size() > options_.max_ended_remembered) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

absl::Status TransactionService::MoveUnresolved(const std::string& message_id, const Pending& p) {
  TOKIMQ_ASSIGN_OR_RETURN(Message m, store_->Read(PhysicalOffset(p.phys)));
  m.topic = kUnresolvedTopic;
  m.queue_id = 0;
  m.queue_offset = QueueOffset::kNone();
  m.physical_offset = PhysicalOffset::kNone();
  m.flags = kFlagNone;
  m.properties[prop::kTxHalfOffset] = std::to_string(p.phys);
  TOKIMQ_RETURN_IF_ERROR(store_->Put(std::move(m)).status());
  return WriteOp(p.phys, message_id, p, TxOutcome::kUnresolved, "max_checks");
}

void TransactionService::SetCheckSink(CheckSink sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sink_ = std::move(sink);
}

absl::StatusOr<int> TransactionService::RunChecks() {
  const int64_t now = clock_->NowMs();
  std::vector<std::pair<std::string, Pending>> due;
  CheckSink sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, p] : pending_) {
      if (p.ending || p.copy_written || p.next_check_ms > now) continue;
      if (p.checks >= options_.max_checks) p.ending = true;  // moved below
      due.emplace_back(id, p);
    }
    sink = sink_;
  }
  std::sort(due.begin(), due.end(),
            [](const auto& a, const auto& b) { return a.second.phys < b.second.phys; });
  absl::Status first_error;
  for (auto& [id, p] : due) {
    if (p.ending) {
      absl::Status s = MoveUnresolved(id, p);
      std::lock_guard<std::mutex> lock(mu_);
      if (s.ok()) {
        FinishLocked(id, TxOutcome::kUnresolved);
      } else {
        auto it = pending_.find(id);
        if (it != pending_.end()) it->second.ending = false;
        if (first_error.ok()) first_error = s;
      }
      ended_cv_.notify_all();
      continue;
    }
    HalfCheck check;
    check.transaction_id = p.transaction_id;
    absl::StatusOr<Message> half = store_->Read(PhysicalOffset(p.phys));
    if (!half.ok()) {
      if (first_error.ok()) first_error = half.status();
      continue;
    }
    check.msg = std::move(*half);
    check.msg.topic = p.topic;
    int64_t qid = 0;
    auto q = check.msg.properties.find(prop::kRealQueueId);
    if (q != check.msg.properties.end()) ParseInt64(q->second, &qid);
    check.msg.queue_id = static_cast<int32_t>(qid);
    for (const char* k : {prop::kRealTopic, prop::kRealQueueId, prop::kTxImmunityMs}) {
      check.msg.properties.erase(k);
    }
    check.check_count = p.checks + 1;
    bool delivered = sink && sink(check);
    std::lock_guard<std::mutex> lock(mu_);
    ++(delivered ? counters_.checks_sent : counters_.checks_without_producer);
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second.ending) continue;  // answered already
    ++it->second.checks;
    it->second.next_check_ms = now + options_.check_interval_ms;
  }
  if (!first_error.ok()) return first_error;
  return static_cast<int>(due.size());
}

void TransactionService::Start() {
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(thread_mu_);
    while (!stop_) {
      lock.unlock();
      absl::StatusOr<int> n = RunChecks();
      if (!n.ok()) TOKIMQ_LOG_WARN("transaction checks: {}", n.status().ToString());
      lock.lock();
      thread_cv_.wait_for(lock, std::chrono::milliseconds(options_.check_tick_ms),
                          [this] { return stop_; });
    }
  });
}

void TransactionService::Stop() {
  {
    std::lock_guard<std::mutex> lock(thread_mu_);
    stop_ = true;
  }
  thread_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

TransactionStats TransactionService::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TransactionStats s = counters_;
  s.pending = static_cast<int64_t>(pending_.size());
  int64_t oldest = INT64_MAX;
  for (const auto& [id, p] : pending_) oldest = std::min(oldest, p.store_ms);
  if (oldest != INT64_MAX) s.oldest_pending_age_ms = std::max<int64_t>(0, clock_->NowMs() - oldest);
  return s;
}

}  // namespace tokimq::broker
