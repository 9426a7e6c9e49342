// The subcommands of the `tokimq` CLI. Each returns OK or the error to print as one line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/connection.h"
#include "client/producer.h"

namespace tokimq::cli {

struct TopicArgs {
  std::string name;
  std::string type = "normal";
  int queues = 0;
  std::string max_delay;  // human duration; "" = broker default
  std::string retention;
  std::vector<std::string> brokers;      // cluster: create on these brokers (default: all live)
  std::vector<std::string> add_brokers;  // cluster: update adds these brokers
};

struct SendArgs {
  std::string topic;
  std::string delay;  // human duration
  std::string at;     // RFC 3339 or ms
  std::string key;
  std::string message_group;  // FIFO topics
  std::string tag;
  std::vector<std::string> properties;  // k=v
  std::optional<std::string> body;
  std::string file;
  int batch = 64;    // messages per request when reading lines
  bool quiet = false;
  bool transactional = false;  // TRANSACTION topics: a half message; prints the transaction id
  // Cluster mode: how long a send retries while its broker group has no leader (human
  // duration; "0s": fail at once). ClusterProducer's failover_wait_ms.
  std::string failover_wait = "15s";
};

struct ConsumeArgs {
  std::string group;
  std::string topic;
  std::string invisible = "30s";
  std::string wait = "5s";
  std::string tag_filter;
  std::string sql_filter;  // SQL92 property filter (docs/rocketmq-compat.md "SQL92 filters")
  bool ack = false;
  bool props = false;  // also print each message's properties, one per line
  int count = 1;
};

absl::Status TopicCreate(const client::ClientOptions& o, const TopicArgs& a);
absl::Status TopicUpdate(const client::ClientOptions& o, const TopicArgs& a);
absl::Status TopicList(const client::ClientOptions& o);
absl::Status TopicDescribe(const client::ClientOptions& o, const std::string& name);
absl::Status TopicDelete(const client::ClientOptions& o, const std::string& name);
absl::Status Send(const client::ClientOptions& o, const SendArgs& a);
// One line per sent message: "sent <id> topic=<t> [broker=<b>] queue=<q> offset=<o> deliver_at=<ts>"
// for an immediate message; a delayed one has no offset yet (it gets its queue offset when the
// timer releases it: the broker's answer holds the timer topic's offset, which is no user
// queue's) and ends with " recall=<handle>".
void PrintSendReceipt(const client::SendReceipt& r);
absl::Status Recall(const client::ClientOptions& o, const std::string& handle);
absl::Status Consume(const client::ClientOptions& o, const ConsumeArgs& a);

// Settling deliveries by receipt handle (printed by `consume` as handle=...).
struct SettleArgs {
  std::string group;
  std::vector<std::string> handles;
  std::string duration;  // renew: new invisible duration; nack: redelivery delay ("" = backoff)
};
// One line per handle ("acked <handle>" or the error); fails if any handle failed.
absl::Status AckHandles(const client::ClientOptions& o, const SettleArgs& a);
// Ends the lease now; the message comes back after --delay (default: the group's backoff).
absl::Status NackHandle(const client::ClientOptions& o, const SettleArgs& a);
// Extends the lease; prints the new receipt handle (the old one stops working).
absl::Status RenewHandle(const client::ClientOptions& o, const SettleArgs& a);
// Paging of the topic and group lists (docs/protocol.md "stats"): a limit of 0 lists all; else
// one page of that many names sorting after `*_after`.
struct StatsArgs {
  int topic_limit = 0;
  std::string topics_after;
  int group_limit = 0;
  std::string groups_after;
};
absl::Status Stats(const client::ClientOptions& o, const StatsArgs& a = {});
absl::Status TimerCheckpoint(const client::ClientOptions& o);
absl::Status AdvanceClock(const client::ClientOptions& o, const std::string& duration);

// Transactions (tx_commands.cc, docs/transactions.md).
// `send --transactional` of one message: prints "sent <id> ... tx=<transaction id>".
absl::Status SendTransactional(const client::ClientOptions& o, const SendArgs& a,
                               const client::OutgoingMessage& m);
struct TxEndArgs {
  std::string topic, message_id, transaction_id;
  bool commit = true;
};
absl::Status TxEnd(const client::ClientOptions& o, const TxEndArgs& a);
// The "transactions:" line of `tokimq stats`.
void PrintTransactionStats(const proto::TransactionStats& t);

}  // namespace tokimq::cli
