// TransactionService recovery: op records, pending halves, and the copies a crash left without
// their op record (see the class comment in transaction_service.h).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "common/logging.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "transaction/transaction_op.h"
#include "transaction/transaction_service.h"

namespace tokimq::broker {
namespace {

constexpr int kReadBatch = 1024;

// Calls visit(m) for every stored record of (topic, 0), in queue order.
absl::Status ForEachInQueue(const MessageStore& store, const std::string& topic,
                            const std::function<void(const Message&)>& visit) {
  QueueOffset at = store.MinQueueOffset(topic, 0);
  const QueueOffset end = store.MaxQueueOffset(topic, 0);
  while (at < end) {
    TOKIMQ_ASSIGN_OR_RETURN(std::vector<Message> batch, store.ReadQueue(topic, 0, at, kReadBatch));
    if (batch.empty()) break;  // the rest was deleted by retention
    for (const Message& m : batch) visit(m);
    at = batch.back().queue_offset + 1;
  }
  return absl::OkStatus();
}

int64_t PropInt(const Message& m, const char* key, int64_t fallback) {
  auto it = m.properties.find(key);
  int64_t v = 0;
  return it != m.properties.end() && ParseInt64(it->second, &v) ? v : fallback;
}

}  // namespace

absl::Status TransactionService::Recover() {
  std::unordered_set<int64_t> ended_phys;
  int skipped = 0;
  std::lock_guard<std::mutex> lock(mu_);
  TOKIMQ_RETURN_IF_ERROR(ForEachInQueue(*store_, kOpTopic, [&](const Message& m) {
    std::optional<OpRecord> op = ParseOpRecord(m);
    if (!op) {
      ++skipped;
      return;
    }
    ended_phys.insert(op->half_phys);
    RememberEndedLocked(op->message_id, {op->topic, op->transaction_id, op->outcome});
  }));
  if (skipped > 0) TOKIMQ_LOG_WARN("transactions: {} op records not understood, skipped", skipped);
  TOKIMQ_RETURN_IF_ERROR(ForEachInQueue(*store_, kHalfTopic, [&](const Message& m) {
    if (ended_phys.contains(m.physical_offset.value())) return;
    auto id = m.properties.find(prop::kMessageId);
    auto topic = m.properties.find(prop::kRealTopic);
    auto tx = m.properties.find(prop::kTransactionId);
    if (id == m.properties.end() || topic == m.properties.end() || tx == m.properties.end()) {
      return;
    }
    Pending p;
    p.phys = m.physical_offset.value();
    p.size = static_cast<uint32_t>(m.EncodedSize());
    p.topic = topic->second;
    p.transaction_id = tx->second;
    p.store_ms = m.store_ms;
    p.next_check_ms = m.store_ms + PropInt(m, prop::kTxImmunityMs, options_.default_immunity_ms);
    pending_phys_.insert(p.phys);
    pending_[id->second] = std::move(p);
  }));
  return absl::OkStatus();
}

absl::Status TransactionService::RecoverCopies() {
  std::unordered_map<int64_t, std::string> by_phys;  // pending half offset -> message id
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, p] : pending_) by_phys[p.phys] = id;
  }
  if (by_phys.empty()) return absl::OkStatus();
  CommitLog* log = store_->commit_log();
  int64_t oldest = INT64_MAX;
  for (const auto& [phys, id] : by_phys) oldest = std::min(oldest, phys);
  int64_t at = std::max(oldest, log->MinOffset().value());
  const int64_t end = log->MaxOffset().value();
  int recovered = 0;
  while (at < end) {
    absl::StatusOr<std::pair<Message, PhysicalOffset>> next = log->ReadNext(PhysicalOffset(at));
    if (!next.ok()) {
      TOKIMQ_LOG_WARN("transactions: CommitLog scan stopped at {}: {}", at,
                      next.status().ToString());
      break;
    }
    const Message& m = next->first;
    int64_t half = PropInt(m, prop::kTxHalfOffset, -1);
    auto it = half >= 0 && m.topic != kOpTopic ? by_phys.find(half) : by_phys.end();
    if (it != by_phys.end()) {
      TxOutcome outcome =
          m.topic == kUnresolvedTopic ? TxOutcome::kUnresolved : TxOutcome::kCommit;
      Pending p;
      {
        std::lock_guard<std::mutex> lock(mu_);
        p = pending_.at(it->second);
      }
      TOKIMQ_RETURN_IF_ERROR(WriteOp(half, it->second, p, outcome, "recovery"));
      std::lock_guard<std::mutex> lock(mu_);
      FinishLocked(it->second, outcome);
      by_phys.erase(it);
      ++recovered;
    }
    if (next->second.value() <= at) break;
    at = next->second.value();
  }
  if (recovered > 0) {
    TOKIMQ_LOG_INFO("transactions: {} halves ended before a crash got their op record", recovered);
  }
  return absl::OkStatus();
}

}  // namespace tokimq::broker
