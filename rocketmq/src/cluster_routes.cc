#include "cluster_routes.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "convert.h"

namespace tokimq::rocketmq {

std::optional<v2::Endpoints> EndpointsOf(std::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string host(host_port.substr(0, colon));
  int port = 0;
  if (!absl::SimpleAtoi(std::string(host_port.substr(colon + 1)), &port) || port < 1 || port > 65535) {
    return std::nullopt;
  }
  v2::Endpoints e;
  in_addr v4{};
  in6_addr v6{};
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (::inet_pton(AF_INET6, host.c_str(), &v6) != 1) return std::nullopt;
    e.set_scheme(v2::AddressScheme::IPv6);
  } else if (host.find(':') != std::string::npos) {
    return std::nullopt;  // IPv6 without brackets: the port cannot be told apart
  } else if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    e.set_scheme(v2::AddressScheme::IPv4);
  } else {
    e.set_scheme(v2::AddressScheme::DOMAIN_NAME);
  }
  v2::Address* a = e.add_addresses();
  a->set_host(host);
  a->set_port(port);
  return e;
}

std::vector<GrpcBroker> GrpcBrokersOf(const proto::RouteResponse& route) {
  std::vector<GrpcBroker> out;
  for (const proto::BrokerRoute& b : route.brokers()) {
    if (!b.live() || b.queues() <= 0) continue;
    std::optional<v2::Endpoints> e = EndpointsOf(b.grpc_address());
    if (!e) continue;
    out.push_back(GrpcBroker{b.broker(), std::move(*e), b.queues()});
  }
  return out;
}

bool HostsTopic(const proto::RouteResponse& route, const std::string& self) {
  for (const proto::BrokerRoute& b : route.brokers()) {
    if (b.broker() == self) return true;
  }
  return false;
}

namespace {

// "'b2' (gRPC 10.0.0.12:8081)", "'b2' (not live)" or "'b2' (no gRPC endpoint)".
std::string BrokerText(const proto::BrokerRoute& b) {
  if (!b.live()) return fmt::format("'{}' (not live)", b.broker());
  if (b.grpc_address().empty()) return fmt::format("'{}' (no gRPC endpoint)", b.broker());
  return fmt::format("'{}' (gRPC {})", b.broker(), b.grpc_address());
}

}  // namespace

v2::Status ForeignQueueStatus(const std::string& topic, int32_t queue_id, const std::string& owner,
                              const std::string& self, const proto::RouteResponse* route) {
  std::string where = fmt::format("'{}'", owner);
  if (route != nullptr) {
    for (const proto::BrokerRoute& b : route->brokers()) {
      if (b.broker() == owner) where = BrokerText(b);
    }
  }
  const std::string what = queue_id < 0 ? fmt::format("topic '{}'", topic)
                                        : fmt::format("queue {} of topic '{}'", queue_id, topic);
  return MakeStatus(
      v2::Code::NOT_FOUND,
      fmt::format("{} is on broker {}, not on this broker '{}': send the request to that "
                  "broker's endpoint (QueryRoute lists every broker's); tokimq brokers do not "
                  "forward requests",
                  what, where, self));
}

v2::Status TopicNotHereStatus(const proto::RouteResponse& route, const std::string& self) {
  std::string hosts;
  for (const proto::BrokerRoute& b : route.brokers()) {
    if (!hosts.empty()) hosts += ", ";
    hosts += BrokerText(b);
  }
  return MakeStatus(
      v2::Code::NOT_FOUND,
      fmt::format("topic '{}' is not placed on this broker '{}' of cluster '{}'; its brokers: "
                  "{}: send to one of them (QueryRoute lists their endpoints); tokimq brokers "
                  "do not forward requests",
                  route.topic().name(), self, route.cluster(), hosts.empty() ? "none" : hosts));
}

}  // namespace tokimq::rocketmq
