#include "client/route_cache.h"

#include <algorithm>

#include "common/fnv1a.h"
#include "fmt/format.h"

namespace tokimq::client {

std::string JoinBrokerHandle(const std::string& broker, const std::string& handle) {
  return broker + "|" + handle;
}

absl::Status SplitBrokerHandle(const std::string& joined, std::string* broker,
                               std::string* handle) {
  const size_t bar = joined.find('|');
  if (bar == std::string::npos || bar == 0) {
    return absl::InvalidArgumentError("handle does not name its broker (not from a cluster client)");
  }
  *broker = joined.substr(0, bar);
  *handle = joined.substr(bar + 1);
  return absl::OkStatus();
}

int BrokerOfQueueIndex(const proto::RouteResponse& route, uint64_t i) {
  uint64_t total = 0;
  for (const proto::BrokerRoute& b : route.brokers()) total += static_cast<uint64_t>(b.queues());
  if (total == 0) return 0;
  i %= total;
  for (int b = 0; b < route.brokers_size(); ++b) {
    const uint64_t q = static_cast<uint64_t>(route.brokers(b).queues());
    if (i < q) return b;
    i -= q;
  }
  return 0;
}

int FifoBrokerIndex(const proto::RouteResponse& route, const std::string& group) {
  return BrokerOfQueueIndex(route, Fnv1a64(group));
}

RouteCache::RouteCache(ClientOptions bootstrap, int64_t refresh_ms, Clock* clock)
    : bootstrap_(std::move(bootstrap)), refresh_ms_(refresh_ms), clock_(clock) {
  std::string item;
  for (char c : bootstrap_.broker + ",") {
    if (c == ',') {
      if (!item.empty()) addresses_.push_back(item);
      item.clear();
    } else if (c != ' ') {
      item.push_back(c);
    }
  }
}

ClientOptions RouteCache::OptionsFor(const std::string& address) const {
  ClientOptions o = bootstrap_;
  o.broker = address;
  return o;
}

void RouteCache::Invalidate(const std::string& topic) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_.erase(topic);
}

absl::StatusOr<proto::RouteResponse> RouteCache::Get(const std::string& topic) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = routes_.find(topic);
    if (it != routes_.end() && clock_->NowMs() - it->second.fetched_ms < refresh_ms_) {
      return it->second.route;
    }
  }
  return Fetch(topic);
}

absl::StatusOr<proto::Response> RouteCache::CallAny(const proto::Request& req) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::vector<std::string> candidates = addresses_;
  absl::Status last = absl::UnavailableError("no broker address to ask");
  for (const std::string& address : candidates) {
    auto& holder = conns_[address];
    if (!holder) holder = std::make_unique<ConnectionHolder>(OptionsFor(address));
    ConnectionHolder* conn = holder.get();
    lock.unlock();
    absl::StatusOr<proto::Response> resp = conn->Call(req);
    lock.lock();
    if (resp.ok()) {
      // The broker that answered is asked first next time.
      auto it = std::find(addresses_.begin(), addresses_.end(), address);
      if (it != addresses_.end()) std::rotate(addresses_.begin(), it, it + 1);
      return resp;
    }
    last = resp.status();
    // A broker's answer is final; only transport failures try the next one.
    if (!absl::IsUnavailable(last) && !absl::IsDeadlineExceeded(last)) return last;
  }
  return last;
}

absl::StatusOr<proto::RouteResponse> RouteCache::Fetch(const std::string& topic) {
  proto::Request req;
  req.mutable_route()->set_topic(topic);
  absl::StatusOr<proto::Response> resp = CallAny(req);
  if (!resp.ok()) {
    return absl::Status(resp.status().code(),
                        fmt::format("route of '{}': {}", topic,
                                    std::string(resp.status().message())));
  }
  const proto::RouteResponse& route = resp->route();
  std::lock_guard<std::mutex> lock(mu_);
  // Every live broker of the route becomes a broker to ask later (after the known ones).
  for (const proto::BrokerRoute& b : route.brokers()) {
    if (!b.live()) continue;
    addresses_by_name_[b.broker()] = b.address();
    if (std::find(addresses_.begin(), addresses_.end(), b.address()) == addresses_.end()) {
      addresses_.push_back(b.address());
    }
  }
  routes_[topic] = Entry{route, clock_->NowMs()};
  return route;
}

absl::StatusOr<proto::ClusterStatusResponse> RouteCache::Status() {
  proto::Request req;
  req.mutable_cluster_status();
  absl::StatusOr<proto::Response> resp = CallAny(req);
  if (!resp.ok()) return resp.status();
  std::lock_guard<std::mutex> lock(mu_);
  for (const proto::BrokerRecord& m : resp->cluster_status().members()) {
    addresses_by_name_[m.name()] = m.address();
  }
  return resp->cluster_status();
}

absl::StatusOr<std::string> RouteCache::AddressOf(const std::string& broker) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = addresses_by_name_.find(broker);
    if (it != addresses_by_name_.end()) return it->second;
  }
  absl::StatusOr<proto::ClusterStatusResponse> status = Status();
  if (!status.ok()) return status.status();
  for (const proto::BrokerRecord& m : status->members()) {
    if (m.name() == broker) return m.address();
  }
  return absl::NotFoundError(fmt::format("broker '{}' is not a live member of the cluster", broker));
}

}  // namespace tokimq::client
