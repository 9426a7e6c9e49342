// ClusterOptions: how tokimq-broker joins a cluster (flags --cluster, --etcd-endpoints,
// --broker-name, --advertise, --advertise-grpc; TOML keys of the same names with '_').
// docs/cluster.md. An empty `cluster` is the single node of before: no etcd at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tokimq::broker {

struct ClusterOptions {
  std::string cluster;                      // cluster name; "" : single node
  std::vector<std::string> etcd_endpoints;  // host:port of etcd's client URLs
  std::string broker_name;                  // unique in the cluster; the topic name rule
  // host:port clients use for the native port; "": the bind address and the bound port
  // (0.0.0.0 / :: advertise 127.0.0.1).
  std::string advertise;
  // host:port of the RocketMQ gRPC endpoint in routes; "": bind address and --grpc-port.
  std::string advertise_grpc;
  int64_t lease_ttl_s = 10;                 // membership lease (etcd), seconds
  int64_t etcd_timeout_ms = 3'000;          // per etcd call

  bool enabled() const { return !cluster.empty(); }
};

}  // namespace tokimq::broker
