#include "transaction/transaction_op.h"

#include <cstring>

#include "common/parse_int.h"

namespace tokimq::broker {

const char* TxOutcomeName(TxOutcome outcome) {
  switch (outcome) {
    case TxOutcome::kCommit: return "COMMIT";
    case TxOutcome::kRollback: return "ROLLBACK";
    case TxOutcome::kUnresolved: return "UNRESOLVED";
  }
  return "?";
}

Message MakeOpRecord(int64_t half_phys, const std::string& message_id, const std::string& topic,
                     const std::string& transaction_id, TxOutcome outcome, const char* source) {
  Message m;
  m.topic = kOpTopic;
  m.queue_id = 0;
  m.properties[prop::kTxHalfOffset] = std::to_string(half_phys);
  m.properties[prop::kMessageId] = message_id;
  m.properties[prop::kRealTopic] = topic;
  m.properties[prop::kTransactionId] = transaction_id;
  m.properties[prop::kTxOp] = TxOutcomeName(outcome);
  m.properties[prop::kTxSource] = source;
  return m;
}

std::optional<OpRecord> ParseOpRecord(const Message& m) {
  auto get = [&](const char* k) -> const std::string* {
    auto it = m.properties.find(k);
    return it == m.properties.end() ? nullptr : &it->second;
  };
  const std::string* phys = get(prop::kTxHalfOffset);
  const std::string* id = get(prop::kMessageId);
  const std::string* topic = get(prop::kRealTopic);
  const std::string* tx = get(prop::kTransactionId);
  const std::string* op = get(prop::kTxOp);
  if (!phys || !id || !topic || !tx || !op) return std::nullopt;
  OpRecord r;
  if (!ParseInt64(*phys, &r.half_phys) || r.half_phys < 0) return std::nullopt;
  bool known = false;
  for (TxOutcome o : {TxOutcome::kCommit, TxOutcome::kRollback, TxOutcome::kUnresolved}) {
    if (*op == TxOutcomeName(o)) {
      r.outcome = o;
      known = true;
    }
  }
  if (!known) return std::nullopt;
  r.message_id = *id;
  r.topic = *topic;
  r.transaction_id = *tx;
  return r;
}

}  // namespace tokimq::broker
