#include "client/cluster_producer.h"

#include <algorithm>
#include <random>

#include "common/leadership_status.h"
#include "fmt/format.h"

namespace tokimq::client {
namespace {

// A failure after which a non-FIFO send may go to another broker.
bool TryAnotherBroker(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsNotFound(s) ||
         absl::IsResourceExhausted(s);
}

const std::string& GroupOf(const OutgoingMessage& m) {
  return m.message_group.empty() ? m.key : m.message_group;
}

}  // namespace

ClusterProducer::ClusterProducer(ClientOptions bootstrap, int64_t route_refresh_ms,
                                 int64_t failover_wait_ms, Clock* clock)
    : routes_(std::move(bootstrap), route_refresh_ms, clock),
      failover_wait_ms_(failover_wait_ms),
      clock_(clock) {
  // A random first queue: short-lived producers (one CLI send each) still spread.
  next_queue_.store(std::random_device{}());
}

Producer* ClusterProducer::ProducerFor(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& p = producers_[address];
  if (!p) p = std::make_unique<Producer>(routes_.OptionsFor(address));
  return p.get();
}

absl::StatusOr<std::vector<SendReceipt>> ClusterProducer::SendTo(
    const proto::RouteResponse& route, int b, const std::vector<OutgoingMessage>& msgs) {
  const proto::BrokerRoute& broker = route.brokers(b);
  if (!broker.live()) {
    return absl::UnavailableError(
        fmt::format("broker '{}' of topic '{}' is not live", broker.broker(), route.topic().name()));
  }
  absl::StatusOr<std::vector<SendReceipt>> r = ProducerFor(broker.address())->SendBatch(msgs);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        fmt::format("broker '{}': {}", broker.broker(),
                                    std::string(r.status().message())));
  }
  for (SendReceipt& receipt : *r) {
    receipt.broker = broker.broker();
    if (!receipt.recall_handle.empty()) {
      receipt.recall_handle = JoinBrokerHandle(broker.broker(), receipt.recall_handle);
    }
  }
  return r;
}

absl::StatusOr<SendReceipt> ClusterProducer::Send(const OutgoingMessage& msg) {
  absl::StatusOr<std::vector<SendReceipt>> r = SendBatch({msg});
  if (!r.ok()) return r.status();
  return std::move((*r)[0]);
}

absl::StatusOr<std::vector<SendReceipt>> ClusterProducer::SendBatch(
    const std::vector<OutgoingMessage>& msgs) {
  const int64_t deadline = clock_->NowMs() + failover_wait_ms_;
  while (true) {
    absl::StatusOr<std::vector<SendReceipt>> r = SendOnce(msgs);
    if (r.ok() || !IsLeaderMoved(r.status()) || clock_->NowMs() >= deadline) return r;
    if (!msgs.empty()) routes_.Invalidate(msgs[0].topic);
    const int64_t until = std::min(clock_->NowMs() + 100, deadline);
    clock_->WaitUntilMs(until, std::chrono::milliseconds(100));
  }
}

absl::StatusOr<std::vector<SendReceipt>> ClusterProducer::SendOnce(
    const std::vector<OutgoingMessage>& msgs) {
  if (msgs.empty()) return std::vector<SendReceipt>{};
  const std::string& topic = msgs[0].topic;
  for (const OutgoingMessage& m : msgs) {
    if (m.topic != topic) return absl::InvalidArgumentError("a batch names one topic");
  }
  absl::StatusOr<proto::RouteResponse> route = routes_.Get(topic);
  if (!route.ok()) return route.status();
  if (route->topic().type() == proto::FIFO) return SendFifo(*route, msgs);
  return SendSpread(msgs);
}

absl::StatusOr<std::vector<SendReceipt>> ClusterProducer::SendSpread(
    const std::vector<OutgoingMessage>& msgs) {
  const std::string& topic = msgs[0].topic;
  absl::Status last = absl::UnavailableError(fmt::format("no live broker hosts '{}'", topic));
  std::vector<std::string> tried;
  // One attempt per broker; the route is re-read after each failure (it was invalidated).
  for (int attempt = 0; attempt < 8; ++attempt) {
    absl::StatusOr<proto::RouteResponse> route = routes_.Get(topic);
    if (!route.ok()) return route.status();
    const int n = route->brokers_size();
    int pick = -1;
    // The owner of the next queue of the global list, else the next untried live broker.
    const int first = BrokerOfQueueIndex(*route, next_queue_.fetch_add(1));
    for (int step = 0; step < n && pick < 0; ++step) {
      const proto::BrokerRoute& br = route->brokers((first + step) % n);
      if (br.live() && std::find(tried.begin(), tried.end(), br.broker()) == tried.end()) {
        pick = (first + step) % n;
      }
    }
    if (pick < 0) return last;
    tried.push_back(route->brokers(pick).broker());
    absl::StatusOr<std::vector<SendReceipt>> r = SendTo(*route, pick, msgs);
    if (r.ok() || !TryAnotherBroker(r.status())) return r;
    last = r.status();
    routes_.Invalidate(topic);
  }
  return last;
}

absl::StatusOr<std::vector<SendReceipt>> ClusterProducer::SendFifo(
    const proto::RouteResponse& route, const std::vector<OutgoingMessage>& msgs) {
  // Partition by broker, keeping each group's messages in their order.
  std::map<int, std::vector<size_t>> by_broker;
  for (size_t i = 0; i < msgs.size(); ++i) {
    by_broker[FifoBrokerIndex(route, GroupOf(msgs[i]))].push_back(i);
  }
  std::vector<SendReceipt> out(msgs.size());
  for (const auto& [b, index] : by_broker) {
    std::vector<OutgoingMessage> part;
    for (size_t i : index) part.push_back(msgs[i]);
    absl::StatusOr<std::vector<SendReceipt>> r = SendTo(route, b, part);
    if (!r.ok()) {
      if (absl::IsUnavailable(r.status())) routes_.Invalidate(route.topic().name());
      return r.status();
    }
    for (size_t k = 0; k < index.size(); ++k) out[index[k]] = std::move((*r)[k]);
  }
  return out;
}

absl::Status ClusterProducer::Recall(const std::string& recall_handle) {
  std::string broker, handle;
  if (absl::Status s = SplitBrokerHandle(recall_handle, &broker, &handle); !s.ok()) return s;
  absl::StatusOr<std::string> address = routes_.AddressOf(broker);
  if (!address.ok()) return address.status();
  return ProducerFor(*address)->Recall(handle);
}

}  // namespace tokimq::client
