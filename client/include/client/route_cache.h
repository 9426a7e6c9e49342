// RouteCache: the routing client's view of where a topic lives in a tokimq cluster
// (docs/cluster.md "Routing"): the native Route request (topic -> brokers, their addresses and
// queue counts), answered by any broker from its etcd view, cached per topic for refresh_ms
// (default 30 s) and dropped on demand when a send or receive failed (Invalidate).
//
// Bootstrap: ClientOptions.broker is one broker or a comma-separated list; a route is asked
// from the broker that answered last, then the others, then every live broker of routes seen
// before (so a client keeps working when its bootstrap broker dies).
//
// Errors: kNotFound (no such topic in the cluster), kFailedPrecondition (the broker is a single
// node: use Producer / SimpleConsumer), kUnavailable (no broker answered).
// Thread-safety: every method from any thread. Cache ages use the monotonic clock (real time).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "common/clock.h"
#include "proto/tokimq.pb.h"

namespace tokimq::client {

// "<broker>|<handle>": how the routing clients keep which broker issued a receipt or recall
// handle (broker names never contain '|').
std::string JoinBrokerHandle(const std::string& broker, const std::string& handle);
// kInvalidArgument for a handle without a broker part.
absl::Status SplitBrokerHandle(const std::string& joined, std::string* broker,
                               std::string* handle);

// The broker that takes a FIFO message group: FNV-1a 64 of the group modulo the topic's total
// queue count, over the queue list in placement order (broker 0's queues, then broker 1's...).
// Stable while the placement is; with equal queue counts the broker's own key -> queue rule
// (broker/src/queue_of_key.h) then picks exactly that queue. Index into route.brokers().
int FifoBrokerIndex(const proto::RouteResponse& route, const std::string& group);
// The broker owning global queue index `i` (mod the total), index into route.brokers().
int BrokerOfQueueIndex(const proto::RouteResponse& route, uint64_t i);

class RouteCache {
 public:
  // `clock` times the route refresh (ms); it outlives the cache.
  explicit RouteCache(ClientOptions bootstrap, int64_t refresh_ms = 30'000,
                      Clock* clock = SystemClock::Default());

  absl::StatusOr<proto::RouteResponse> Get(const std::string& topic);
  void Invalidate(const std::string& topic);
  // The address of a live broker by name: from the routes seen, else from a cluster status
  // asked of the bootstrap brokers. kNotFound when the cluster does not list it live.
  absl::StatusOr<std::string> AddressOf(const std::string& broker);
  // Cluster status from the first bootstrap (or known) broker that answers.
  absl::StatusOr<proto::ClusterStatusResponse> Status();
  // ClientOptions for one broker (bootstrap's settings, broker = address).
  ClientOptions OptionsFor(const std::string& address) const;

 private:
  absl::StatusOr<proto::RouteResponse> Fetch(const std::string& topic);
  // Sends `req` to the known brokers in turn until one answers (transport errors move on).
  absl::StatusOr<proto::Response> CallAny(const proto::Request& req);

  ClientOptions bootstrap_;
  int64_t refresh_ms_;
  Clock* clock_;
  std::mutex mu_;
  struct Entry {
    proto::RouteResponse route;
    int64_t fetched_ms = 0;  // clock_->NowMs() when fetched
  };
  std::map<std::string, Entry> routes_;           // mu_
  std::map<std::string, std::string> addresses_by_name_;  // mu_: live brokers seen
  std::vector<std::string> addresses_;            // mu_: brokers to ask, first = last good
  std::map<std::string, std::unique_ptr<ConnectionHolder>> conns_;  // mu_: by address
};

}  // namespace tokimq::client
