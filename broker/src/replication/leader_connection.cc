#include "replication/leader_connection.h"

#include "fmt/format.h"

namespace tokimq::broker {

client::ClientOptions LeaderClientOptions(const LeaderConnectionOptions& options,
                                          const std::string& address, std::string client_id,
                                          int64_t connect_timeout_ms) {
  client::ClientOptions o;
  o.broker = address;
  o.connect_timeout_ms = connect_timeout_ms;
  o.client_id = std::move(client_id);
  o.access_key = options.access_key;
  o.secret_key = options.secret_key;
  o.tls = options.tls;
  o.tls_ca_file = options.tls_ca_file;
  o.tls_server_name = options.tls_server_name;
  return o;
}

absl::StatusOr<std::unique_ptr<client::Connection>> OpenLeaderConnection(
    const LeaderConnectionOptions& options, const std::string& leader, int broker_id,
    int64_t connect_timeout_ms) {
  const client::ClientOptions o = LeaderClientOptions(
      options, leader, fmt::format("tokimq-follower-{}", broker_id), connect_timeout_ms);
  absl::StatusOr<std::unique_ptr<client::Connection>> conn = client::Connection::Open(o);
  if (conn.ok() || options.tls || absl::IsInvalidArgument(conn.status())) return conn;
  // An enforcing leader answers a plaintext handshake by closing the connection: the client
  // sees a closed or reset connection, or a timeout, never a protocol error.
  return absl::Status(
      conn.status().code(),
      fmt::format("{} (without TLS: if the leader's tls_mode is enforcing, set replication_tls "
                  "and replication_tls_ca; docs/replication.md \"TLS between members\")",
                  std::string(conn.status().message())));
}

}  // namespace tokimq::broker
