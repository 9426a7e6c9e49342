// GrpcEndpoint: serves RocketMQ 5's gRPC API (apache.rocketmq.v2.MessagingService) so the
// official RocketMQ clients (Producer, SimpleConsumer, PushConsumer) work against tokimq
// unchanged. See docs/rocketmq-compat.md for what is supported and how each RPC maps onto the
// native protocol.
//
// Every RPC is translated into native proto::Request(s) and answered through Broker::Handle;
// the endpoint never touches the stores. Handle blocks (sync flush, long polls), so the server
// uses gRPC's synchronous API: each call runs on a gRPC worker thread (at most
// options.max_threads of them; beyond that new calls fail with RESOURCE_EXHAUSTED).
//
// Ownership: the caller owns the Broker and must keep it open until Shutdown() returned.
// Thread-safety: Shutdown() may be called from any thread, once or more; the destructor calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tokimq::broker {
class Broker;
}

namespace tokimq::rocketmq {

struct GrpcEndpointOptions {
  std::string address = "127.0.0.1";
  int port = 8081;                        // 0: any free port (see GrpcEndpoint::port())
  int max_threads = 128;                  // gRPC sync worker threads (each long poll holds one)
  int32_t max_body_size = 4 << 20;        // bytes; told to producers in the settings handshake
  int32_t receive_batch_size = 32;        // told to push consumers
  int64_t long_polling_timeout_ms = 20'000;      // told to push consumers; should not exceed
                                                 // the broker's max_long_poll_ms
  int64_t default_invisible_ms = 60'000;  // lease when a receive carries no invisible duration
  // Server-side lease renewal for receives with auto_renew (PushConsumers; docs/rocketmq-
  // compat.md "Lease renewal for PushConsumers"): a lease is renewed min(10 s, half the slice)
  // before it ends, to default_invisible_ms from then, until auto_renew_max_ms after the
  // receive (RocketMQ's proxy: 60 s slices, 3 h). 0: no renewal (the lease is the receive's).
  int64_t auto_renew_max_ms = 3LL * 3600 * 1000;
  int64_t max_invisible_ms = 12LL * 3600 * 1000;  // longer requests: ILLEGAL_INVISIBLE_TIME
  // Bodies of messages handed out over gRPC are kept (up to this many bytes, oldest evicted)
  // so ForwardMessageToDeadLetterQueue can copy them into the DLQ topic.
  int64_t dlq_cache_bytes = 32 << 20;
  // TLS (docs/security.md "TLS"): PEM files read once at start. Both set: the port serves TLS
  // only (gRPC cannot serve TLS and plaintext on one port, so the broker's "permissive" mode
  // means TLS here too). Empty: plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Cluster mode (docs/cluster.md "gRPC routing"): this broker's name in its cluster (the
  // broker was started with --cluster; requests then go through the ClusterNode's native
  // `route` / `cluster_status`). QueryRoute / QueryAssignment list every live hosting broker
  // under its name at its advertised gRPC address; a request naming a queue of another broker,
  // or sending to a topic not placed here, is refused with NOT_FOUND naming the owner (never
  // forwarded). Empty: a single broker, answered as broker "tokimq" at the client's access point.
  std::string cluster_broker_name;
};

class GrpcEndpoint {
 public:
  virtual ~GrpcEndpoint() = default;
  // The bound port (useful with options.port == 0).
  virtual int port() const = 0;
  // Stops accepting calls, cancels open streams and waits for running handlers (a long poll
  // ends within the broker's max long poll). Idempotent.
  virtual void Shutdown() = 0;
};

// Builds and starts the gRPC server. kUnavailable when the address cannot be bound.
absl::StatusOr<std::unique_ptr<GrpcEndpoint>> StartGrpcEndpoint(broker::Broker* broker,
                                                                GrpcEndpointOptions options);

}  // namespace tokimq::rocketmq
