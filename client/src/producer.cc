#include "client/producer.h"

#include <chrono>

#include "common/message_limits.h"
#include "fmt/format.h"
#include "proto/status.h"

namespace tokimq::client {
namespace {

void Fill(const OutgoingMessage& m, proto::SendEntry* e) {
  e->set_topic(m.topic);
  e->set_body(m.body);
  e->set_key(m.key);
  e->set_tag(m.tag);
  if (!m.message_group.empty()) e->set_message_group(m.message_group);
  for (const auto& [k, v] : m.properties) (*e->mutable_properties())[k] = v;
  if (m.deliver_at_ms) {
    e->set_deliver_at_ms(*m.deliver_at_ms);
  } else if (m.delay_ms) {
    e->set_delay_ms(*m.delay_ms);
  }
}

// The broker's limits on key, tag and properties, checked before anything is sent (the broker
// checks them again): the caller learns which message broke which limit without a round trip.
absl::Status CheckLimits(const std::vector<OutgoingMessage>& msgs) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    absl::Status s = CheckMessageHeaders(msgs[i].key, msgs[i].tag, msgs[i].properties);
    if (s.ok()) continue;
    if (msgs.size() == 1) return s;
    return absl::InvalidArgumentError(fmt::format("message {}: {}", i, std::string(s.message())));
  }
  return absl::OkStatus();
}

proto::Request BatchRequest(const std::vector<OutgoingMessage>& msgs) {
  proto::Request req;
  for (const OutgoingMessage& m : msgs) Fill(m, req.mutable_send()->add_entries());
  return req;
}

absl::StatusOr<std::vector<SendReceipt>> ToReceipts(absl::StatusOr<proto::Response> resp,
                                                    size_t expected) {
  if (!resp.ok()) return resp.status();
  if (resp->has_status() && resp->status().code() != 0) return wire::FromProto(resp->status());
  const proto::SendResponse& s = resp->send();
  if (static_cast<size_t>(s.results_size()) != expected) {
    return absl::InternalError("broker answered a send with the wrong number of results");
  }
  std::vector<SendReceipt> out;
  out.reserve(expected);
  for (const proto::SendResult& r : s.results()) {
    SendReceipt rc;
    rc.message_id = r.message_id();
    rc.topic = r.topic();
    rc.queue_id = r.queue_id();
    rc.queue_offset = QueueOffset(r.queue_offset());
    rc.recall_handle = r.recall_handle();
    rc.deliver_at_ms = r.deliver_at_ms();
    rc.delayed = r.delayed();
    out.push_back(std::move(rc));
  }
  return out;
}

}  // namespace

Producer::Producer(ClientOptions options) : conn_(std::move(options)) {}

Producer::~Producer() {
  stopping_ = true;
  if (check_thread_.joinable()) check_thread_.join();
}

absl::StatusOr<SendReceipt> Producer::Send(const OutgoingMessage& msg) {
  auto receipts = SendBatch({msg});
  if (!receipts.ok()) return receipts.status();
  return std::move(receipts->front());
}

absl::StatusOr<std::vector<SendReceipt>> Producer::SendBatch(
    const std::vector<OutgoingMessage>& msgs) {
  if (msgs.empty()) return std::vector<SendReceipt>{};
  if (absl::Status s = CheckLimits(msgs); !s.ok()) return s;
  return ToReceipts(conn_.Call(BatchRequest(msgs)), msgs.size());
}

void Producer::SendBatchAsync(const std::vector<OutgoingMessage>& msgs,
                              std::function<void(absl::StatusOr<std::vector<SendReceipt>>)> done) {
  if (absl::Status s = CheckLimits(msgs); !s.ok()) return done(s);
  auto conn = conn_.Get();
  if (!conn.ok()) return done(conn.status());
  size_t n = msgs.size();
  (*conn)->CallAsync(BatchRequest(msgs), conn_.options().request_timeout_ms,
                     [n, done = std::move(done)](absl::StatusOr<proto::Response> resp) {
                       done(ToReceipts(std::move(resp), n));
                     });
}

void Producer::SendAsync(const OutgoingMessage& msg,
                         std::function<void(absl::StatusOr<SendReceipt>)> done) {
  SendBatchAsync({msg}, [done = std::move(done)](absl::StatusOr<std::vector<SendReceipt>> r) {
    if (!r.ok()) return done(r.status());
    done(std::move(r->front()));
  });
}

std::future<absl::StatusOr<SendReceipt>> Producer::SendAsync(const OutgoingMessage& msg) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<SendReceipt>>>();
  auto future = promise->get_future();
  SendAsync(msg, [promise](absl::StatusOr<SendReceipt> r) { promise->set_value(std::move(r)); });
  return future;
}

absl::Status Producer::Recall(const std::string& recall_handle) {
  proto::Request req;
  req.mutable_recall()->set_recall_handle(recall_handle);
  return conn_.Call(std::move(req)).status();
}

absl::StatusOr<TransactionReceipt> Producer::SendTransactional(const OutgoingMessage& msg) {
  if (absl::Status s = CheckLimits({msg}); !s.ok()) return s;
  proto::Request req = BatchRequest({msg});
  req.mutable_send()->mutable_entries(0)->set_transactional(true);
  absl::StatusOr<proto::Response> resp = conn_.Call(std::move(req));
  std::string tx_id = resp.ok() && resp->send().results_size() == 1
                          ? resp->send().results(0).transaction_id()
                          : std::string();
  auto receipts = ToReceipts(std::move(resp), 1);
  if (!receipts.ok()) return receipts.status();
  if (tx_id.empty()) return absl::InternalError("broker answered a transactional send without id");
  return TransactionReceipt{std::move(receipts->front()), std::move(tx_id)};
}

absl::Status Producer::EndTransaction(const std::string& topic, const std::string& message_id,
                                      const std::string& transaction_id,
                                      TransactionResolution r) {
  return EndTransactionFrom(topic, message_id, transaction_id, r, /*from_check=*/false);
}

absl::Status Producer::EndTransactionFrom(const std::string& topic, const std::string& message_id,
                                          const std::string& transaction_id,
                                          TransactionResolution r, bool from_check) {
  if (r == TransactionResolution::kUnknown) {
    return absl::InvalidArgumentError("EndTransaction needs COMMIT or ROLLBACK");
  }
  proto::Request req;
  proto::EndTransactionRequest* e = req.mutable_end_transaction();
  e->set_topic(topic);
  e->set_message_id(message_id);
  e->set_transaction_id(transaction_id);
  e->set_resolution(r == TransactionResolution::kCommit ? proto::COMMIT : proto::ROLLBACK);
  e->set_source(from_check ? proto::SOURCE_CHECK : proto::SOURCE_CLIENT);
  return conn_.Call(std::move(req)).status();
}

void Producer::SetTransactionChecker(std::vector<std::string> topics, TransactionChecker checker) {
  std::lock_guard<std::mutex> lock(checker_mu_);
  checker_topics_ = std::move(topics);
  checker_ = std::move(checker);
  if (!check_thread_.joinable()) check_thread_ = std::thread([this] { CheckLoop(); });
}

// The check-back channel: long polls on a connection of its own (a poll does not hold up the
// sends' connection), each check answered through EndTransaction (source: check).
void Producer::CheckLoop() {
  constexpr int64_t kPollMs = 1000;  // short: the destructor waits for the poll in flight
  ConnectionHolder checks(conn_.options());
  while (!stopping_) {
    proto::Request req;
    TransactionChecker checker;
    {
      std::lock_guard<std::mutex> lock(checker_mu_);
      for (const std::string& t : checker_topics_) {
        req.mutable_poll_transaction_checks()->add_topics(t);
      }
      checker = checker_;
    }
    req.mutable_poll_transaction_checks()->set_long_poll_ms(kPollMs);
    absl::StatusOr<proto::Response> resp = checks.Call(std::move(req), kPollMs);
    if (!resp.ok()) {
      // Broker away: try again shortly (no busy loop).
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    for (const proto::TransactionCheck& c : resp->transaction_checks().checks()) {
      TransactionCheck tc{c.topic(), c.message_id(), c.transaction_id(), c.key(), c.tag(),
                          c.body(), {c.properties().begin(), c.properties().end()}};
      TransactionResolution r = checker(tc);
      if (r == TransactionResolution::kUnknown) continue;
      // An error (ended meanwhile, broker away) is left to the next check.
      (void)EndTransactionFrom(tc.topic, tc.message_id, tc.transaction_id, r, /*from_check=*/true);
    }
  }
}

}  // namespace tokimq::client
