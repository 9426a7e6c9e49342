// Transaction op records: the durable record that a half message was committed, rolled back or
// moved to the unresolved topic (RocketMQ's op-half topic). One record per ended half, in the
// system topic kOpTopic, queue 0, empty body; everything is in properties (decimal strings):
//   TX_HALF_OFFSET  physical offset of the half record
//   UNIQ_KEY        the half's message id
//   REAL_TOPIC      the half's topic
//   TX_ID           its transaction id
//   TX_OP           COMMIT | ROLLBACK | UNRESOLVED (persisted names: never renamed)
//   TX_SOURCE       client | check | recovery | max_checks (informational)
// Grammar and example: docs/formats/transaction-op.md. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "commitlog/message.h"
#include "transaction/transaction_service.h"

namespace tokimq::broker {

const char* TxOutcomeName(TxOutcome outcome);

Message MakeOpRecord(int64_t half_phys, const std::string& message_id, const std::string& topic,
                     const std::string& transaction_id, TxOutcome outcome, const char* source);

struct OpRecord {
  int64_t half_phys = -1;
  std::string message_id;
  std::string topic;
  std::string transaction_id;
  TxOutcome outcome = TxOutcome::kCommit;
};
// std::nullopt when `m` lacks a field or holds an unknown TX_OP (recovery skips it with a
// warning: an unknown op from a newer broker must not be taken for a commit).
std::optional<OpRecord> ParseOpRecord(const Message& m);

}  // namespace tokimq::broker
