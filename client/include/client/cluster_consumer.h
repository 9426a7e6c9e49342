// ClusterConsumer: a SimpleConsumer for a tokimq cluster (docs/cluster.md "Routing"). A group's
// consumption of a topic spans every broker hosting it: Receive long-polls all the live ones
// in parallel and returns what the first answers bring (merged); the polls still open stay
// open and their messages come with a later Receive (they are leased from their arrival: keep
// invisible_ms well above the time between Receives). Each receipt handle becomes
// "<broker>|<handle>", and Ack / ChangeInvisibleDuration / Nack go to the broker that issued
// it (data and consumer-group state stay per broker).
//
// A broker whose poll fails (down, restarting) is not polled for 500 ms and the route is
// re-read (its lease lapses within the TTL); a failing broker never makes Receive fail: it
// returns what the others have (possibly nothing). Receive fails only when no broker of the
// topic is live. Up to options.max_messages per broker per
// Receive.
// Errors as SimpleConsumer, plus kInvalidArgument for a handle not from a ClusterConsumer.
// Thread-safety: every method from any thread. The destructor waits for open polls (up to
// their long-poll time).
#pragma once

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/route_cache.h"
#include "client/simple_consumer.h"

namespace tokimq::client {

class ClusterConsumer {
 public:
  // `clock` times route refreshes and broker retry pauses; it outlives the consumer.
  ClusterConsumer(ClientOptions bootstrap, std::string group, int64_t route_refresh_ms = 30'000,
                  Clock* clock = SystemClock::Default());
  ~ClusterConsumer();

  absl::StatusOr<std::vector<ReceivedMessage>> Receive(const std::string& topic,
                                                       const ReceiveOptions& options = {});
  absl::Status Ack(const std::string& receipt_handle);
  // One status per handle; one request per broker.
  absl::StatusOr<std::vector<absl::Status>> AckBatch(const std::vector<std::string>& handles);
  absl::StatusOr<std::string> ChangeInvisibleDuration(const std::string& receipt_handle,
                                                      int64_t invisible_ms);
  absl::Status Nack(const std::string& receipt_handle, std::optional<int64_t> delay_ms = {});

  const std::string& group() const { return group_; }
  RouteCache& routes() { return routes_; }

 private:
  struct Poll {
    bool done = false;
    absl::StatusOr<std::vector<ReceivedMessage>> result{std::vector<ReceivedMessage>{}};
  };
  SimpleConsumer* ConsumerFor(const std::string& broker, const std::string& address);
  absl::StatusOr<SimpleConsumer*> ConsumerOfHandle(const std::string& joined, std::string* broker,
                                                   std::string* handle);

  Clock* clock_;
  RouteCache routes_;
  std::string group_;
  std::mutex mu_;
  std::condition_variable cv_;
  // mu_: by broker name (address kept to notice a broker that came back elsewhere).
  std::map<std::string, std::pair<std::string, std::unique_ptr<SimpleConsumer>>> consumers_;
  std::map<std::string, std::shared_ptr<Poll>> polls_;  // mu_: "<topic>|<broker>"
  std::vector<std::future<void>> tasks_;                // mu_: the poll threads (pruned)
  // mu_: a broker whose poll failed is not polled again before this time.
  std::map<std::string, int64_t> cooldown_;  // clock_ ms
  static constexpr int64_t kBrokerRetryDelayMs = 500;
};

}  // namespace tokimq::client
