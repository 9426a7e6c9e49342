// `tokimq send --transactional`, `tokimq tx commit|rollback` and the transactions line of
// `tokimq stats` (docs/transactions.md).
#include <cstdio>

#include "commands.h"
#include "client/producer.h"

namespace tokimq::cli {

absl::Status SendTransactional(const client::ClientOptions& o, const SendArgs& a,
                               const client::OutgoingMessage& m) {
  (void)a;
  client::Producer producer(o);
  auto r = producer.SendTransactional(m);
  if (!r.ok()) return r.status();
  std::printf("sent %s topic=%s queue=%d (half, invisible until commit) tx=%s\n",
              r->receipt.message_id.c_str(), r->receipt.topic.c_str(), r->receipt.queue_id,
              r->transaction_id.c_str());
  return absl::OkStatus();
}

absl::Status TxEnd(const client::ClientOptions& o, const TxEndArgs& a) {
  client::Producer producer(o);
  absl::Status s = producer.EndTransaction(
      a.topic, a.message_id, a.transaction_id,
      a.commit ? client::TransactionResolution::kCommit : client::TransactionResolution::kRollback);
  if (s.ok()) {
    std::printf("%s %s\n", a.commit ? "committed" : "rolled back", a.message_id.c_str());
  }
  return s;
}

void PrintTransactionStats(const proto::TransactionStats& t) {
  std::printf(
      "transactions: halves_pending=%lld oldest_pending_age_ms=%lld commits=%lld rollbacks=%lld "
      "checks_sent=%lld checks_without_producer=%lld moved_unresolved=%lld (in "
      "tokimq_sys_trans_unresolved)\n",
      static_cast<long long>(t.halves_pending()), static_cast<long long>(t.oldest_pending_age_ms()),
      static_cast<long long>(t.commits()), static_cast<long long>(t.rollbacks()),
      static_cast<long long>(t.checks_sent()),
      static_cast<long long>(t.checks_without_producer()),
      static_cast<long long>(t.moved_unresolved()));
}

}  // namespace tokimq::cli
