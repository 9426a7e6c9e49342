// ClusterProducer: a Producer for a tokimq cluster (docs/cluster.md "Routing"). It learns where
// a topic lives from any broker (RouteCache, refreshed every route_refresh_ms and after an
// error) and keeps one Producer per broker.
//
// Placement of a send:
//   - non-FIFO topics: the next queue of the topic's global queue list (every live broker's
//     queues, round robin), so brokers get sends in proportion to their queue counts. When that
//     broker fails (unreachable, timeout, topic not yet there, disk full) the route is dropped
//     and the send is retried on the next live broker, each broker at most once. A timeout may
//     mean the first broker stored it too: a retried message can be stored twice
//     (at-least-once, as RocketMQ's producer retries).
//   - FIFO topics: the message group (else the key) always maps to the same broker
//     (FifoBrokerIndex); when that broker is down the send fails with kUnavailable rather than
//     go elsewhere and reorder the group.
// Failover (issue 20): a broker name is a group whose leader the cluster elects. When a send
// fails because the leader is gone (unreachable, timeout) or the broker asked is no longer the
// leader or is still starting as leader (common/leadership_status.h IsLeaderMoved), the route
// is re-read and the send retried, every 100 ms, for up to failover_wait_ms (default 15 s: the
// default 10 s leader lease plus the election), so sends go on once the route names the new
// leader. Such a retry may store a
// message twice, as above.
// Receipts name the broker (SendReceipt.broker); recall handles are "<broker>|<handle>" and
// Recall sends them to that broker.
//
// Errors as Producer, plus kUnavailable when no live broker hosts the topic.
// Thread-safety: every method from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/producer.h"
#include "client/route_cache.h"

namespace tokimq::client {

class ClusterProducer {
 public:
  // bootstrap.broker: one or more brokers of the cluster ("h1:p1,h2:p2").
  explicit ClusterProducer(ClientOptions bootstrap, int64_t route_refresh_ms = 30'000,
                           int64_t failover_wait_ms = 15'000, Clock* clock = SystemClock::Default());

  absl::StatusOr<SendReceipt> Send(const OutgoingMessage& msg);
  // Messages of one topic. Non-FIFO: the whole batch goes to one broker (the next in turn; on
  // failure the next one). FIFO: one request per broker of the groups in it. Receipts in
  // input order.
  absl::StatusOr<std::vector<SendReceipt>> SendBatch(const std::vector<OutgoingMessage>& msgs);
  absl::Status Recall(const std::string& recall_handle);

  RouteCache& routes() { return routes_; }

 private:
  Producer* ProducerFor(const std::string& address);
  // Sends `msgs` (one topic) to one broker of `route`, index b; fills the broker field and
  // the joined recall handles.
  absl::StatusOr<std::vector<SendReceipt>> SendTo(const proto::RouteResponse& route, int b,
                                                  const std::vector<OutgoingMessage>& msgs);
  // One routing attempt (SendSpread / SendFifo), without the failover wait.
  absl::StatusOr<std::vector<SendReceipt>> SendOnce(const std::vector<OutgoingMessage>& msgs);
  absl::StatusOr<std::vector<SendReceipt>> SendSpread(const std::vector<OutgoingMessage>& msgs);
  absl::StatusOr<std::vector<SendReceipt>> SendFifo(const proto::RouteResponse& route,
                                                    const std::vector<OutgoingMessage>& msgs);

  RouteCache routes_;
  int64_t failover_wait_ms_;
  Clock* clock_;
  std::atomic<uint64_t> next_queue_{0};
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Producer>> producers_;  // mu_: by address
};

}  // namespace tokimq::client
