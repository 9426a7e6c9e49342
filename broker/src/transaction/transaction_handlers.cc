// Broker's transaction requests: the half store on send, EndTransaction, the native check-back
// channel (PollTransactionChecks) and the Stats section (docs/transactions.md).
#include <algorithm>

#include "broker/broker.h"
#include "commitlog/message_store.h"
#include "common/clock.h"
#include "common/names.h"
#include "common/status.h"
#include "send_validation.h"
#include "transaction/check_mailbox.h"
#include "transaction/transaction_service.h"

namespace tokimq::broker {
namespace {

proto::TransactionCheck ToProtoCheck(const HalfCheck& c) {
  proto::TransactionCheck out;
  out.set_topic(c.msg.topic);
  auto get = [&](const char* k) -> std::string {
    auto it = c.msg.properties.find(k);
    return it == c.msg.properties.end() ? std::string() : it->second;
  };
  out.set_message_id(get(prop::kMessageId));
  out.set_transaction_id(c.transaction_id);
  out.set_key(get(prop::kKeys));
  out.set_tag(get(prop::kTag));
  out.set_body(c.msg.body);
  for (const auto& [k, v] : c.msg.properties) {
    if (k == prop::kKeys || k == prop::kTag || k == prop::kMessageId) continue;
    (*out.mutable_properties())[k] = v;
  }
  out.set_check_count(c.check_count);
  return out;
}

}  // namespace

absl::Status Broker::OpenTransactions() {
  TransactionOptions o;
  o.default_immunity_ms = options_.transaction_immunity_ms;
  o.check_interval_ms = options_.transaction_check_interval_ms;
  o.max_checks = options_.transaction_max_checks;
  TOKIMQ_ASSIGN_OR_RETURN(transactions_,
                          TransactionService::Open(clock_, store_.get(), timers_.get(), o));
  check_mailbox_ = std::make_unique<CheckMailbox>();
  transactions_->SetCheckSink([this](const HalfCheck& c) {
    proto::TransactionCheck check = ToProtoCheck(c);
    bool native = check_mailbox_->Offer(check);
    std::lock_guard<std::mutex> lock(check_sink_mu_);
    bool external = external_check_sink_ && external_check_sink_(check);
    return native || external;
  });
  transactions_->Start();
  return absl::OkStatus();
}

void Broker::SetExternalCheckSink(ExternalCheckSink sink) {
  std::lock_guard<std::mutex> lock(check_sink_mu_);
  external_check_sink_ = std::move(sink);
}

absl::Status Broker::StoreHalves(std::vector<PreparedSend>* prepared, const std::vector<int>& index,
                                 int64_t now, proto::SendResponse* resp) {
  std::vector<HalfToPut> halves;
  halves.reserve(index.size());
  for (int i : index) {
    PreparedSend& p = (*prepared)[static_cast<size_t>(i)];
    halves.push_back({std::move(p.msg), p.deliver_ms > now ? p.deliver_ms : 0, p.immunity_ms});
  }
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<HalfPutResult> puts, transactions_->Put(std::move(halves)));
  for (size_t j = 0; j < puts.size() && j < index.size(); ++j) {
    proto::SendResult* r = resp->mutable_results(index[j]);
    r->set_queue_offset(puts[j].put.queue_offset.value());
    r->set_transaction_id(std::move(puts[j].transaction_id));
  }
  return absl::OkStatus();
}

absl::Status Broker::HandleEndTransaction(const proto::EndTransactionRequest& req) {
  TxOutcome outcome;
  switch (req.resolution()) {
    case proto::COMMIT: outcome = TxOutcome::kCommit; break;
    case proto::ROLLBACK: outcome = TxOutcome::kRollback; break;
    default:
      return absl::InvalidArgumentError("end transaction: resolution must be COMMIT or ROLLBACK");
  }
  if (req.message_id().empty() || req.transaction_id().empty()) {
    return absl::InvalidArgumentError("end transaction: message_id and transaction_id are needed");
  }
  return transactions_->End(req.topic(), req.message_id(), req.transaction_id(), outcome,
                            req.source() == proto::SOURCE_CHECK);
}

absl::Status Broker::HandlePollTransactionChecks(const proto::PollTransactionChecksRequest& req,
                                                 proto::TransactionChecksResponse* resp) {
  if (req.topics().empty()) return absl::InvalidArgumentError("poll checks: no topics");
  if (req.topics_size() > 1000) return absl::InvalidArgumentError("poll checks: over 1000 topics");
  for (const std::string& t : req.topics()) TOKIMQ_RETURN_IF_ERROR(ValidateTopicName(t));
  std::vector<std::string> topics(req.topics().begin(), req.topics().end());
  int64_t wait = std::clamp<int64_t>(req.long_poll_ms(), 0, options_.max_long_poll_ms);
  for (proto::TransactionCheck& c : check_mailbox_->Poll(topics, wait, req.max_checks())) {
    *resp->add_checks() = std::move(c);
  }
  return absl::OkStatus();
}

void Broker::FillTransactionStats(proto::TransactionStats* out) const {
  // A follower opens the transaction service only at promotion: no transactions, zeros.
  if (!transactions_) return;
  TransactionStats s = transactions_->Stats();
  out->set_halves_pending(s.pending);
  out->set_oldest_pending_age_ms(s.oldest_pending_age_ms);
  out->set_commits(s.commits);
  out->set_rollbacks(s.rollbacks);
  out->set_checks_sent(s.checks_sent);
  out->set_moved_unresolved(s.moved_unresolved);
  out->set_checks_without_producer(s.checks_without_producer);
}

}  // namespace tokimq::broker
