// Cluster routing of the RocketMQ endpoint (issue 19 item 6; docs/cluster.md "gRPC routing",
// docs/rocketmq-compat.md "Clusters"): how a broker of a cluster turns the native route of a
// topic (proto::RouteResponse, answered by ClusterNode from its etcd view) into RocketMQ
// message queues, and what it answers to a request for a queue or topic that another broker
// holds.
//
// The model, as RocketMQ 5's proxy in "local" mode (one proxy inside each broker): every
// hosting broker appears under its own broker name with broker id 0 and its own advertised gRPC
// endpoint (BrokerRecord.grpc_address, --advertise-grpc), its queues numbered 0..n-1. Clients
// send, receive and ack at that endpoint; a broker never forwards a request to another one.
// (The official Node.js client 1.0.8 keeps only the queues whose *queue* id is 0 — it compares
// the queue id with MASTER_BROKER_ID — so each broker's queue 0 is what it sees: one queue per
// broker, round robin over brokers for sends and receives.)
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convert.h"  // v2 (apache::rocketmq::v2), MakeStatus
#include "proto/tokimq.pb.h"

namespace tokimq::rocketmq {

// "host:port" (a BrokerRecord address) as RocketMQ endpoints: IPv4 for a dotted quad, IPv6 for
// "[addr]:port", DOMAIN_NAME otherwise. nullopt for "" or a malformed address (no port, port
// outside 1..65535, an unbracketed IPv6 address).
std::optional<v2::Endpoints> EndpointsOf(std::string_view host_port);

// One broker of a route that gRPC clients can reach.
struct GrpcBroker {
  std::string name;
  v2::Endpoints endpoints;
  int32_t queues = 0;  // queue ids 0..queues-1 on this broker
};

// The brokers of `route` a gRPC client can use, in placement order: live (registered in etcd
// now), with a well-formed gRPC address (a broker started with --grpc-port 0 has none) and at
// least one queue. Brokers that are down are left out, as RocketMQ's name server drops a broker
// whose registration lapsed; their messages wait on their disks until they are back.
std::vector<GrpcBroker> GrpcBrokersOf(const proto::RouteResponse& route);

// The status for a request naming queue `queue_id` of broker `owner` that reached broker `self`
// (both broker names): NOT_FOUND (40400), naming the owner and, when `route` lists it live, its
// gRPC address. Example: "queue 0 of topic 'orders' is on broker 'b2' (gRPC 10.0.0.12:8081), not
// on this broker 'b1': send it to that endpoint (QueryRoute gives every broker's endpoint);
// tokimq brokers do not forward requests". queue_id -1: the whole topic on `owner`.
v2::Status ForeignQueueStatus(const std::string& topic, int32_t queue_id, const std::string& owner,
                              const std::string& self, const proto::RouteResponse* route);

// The status for a send to broker `self` of a topic the cluster has but did not place on it:
// NOT_FOUND (40400) listing the live hosts and their gRPC addresses.
v2::Status TopicNotHereStatus(const proto::RouteResponse& route, const std::string& self);

// True when `self` is in the placement of `route`.
bool HostsTopic(const proto::RouteResponse& route, const std::string& self);

}  // namespace tokimq::rocketmq
