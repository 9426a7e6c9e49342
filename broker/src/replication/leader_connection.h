// LeaderConnection: how a follower reaches its leader (docs/replication.md "TLS between
// members", "Access"): the one place that turns the replication settings (credentials, TLS, CA
// file, server name) into a client connection, so the pulls (ReplicationService) and the
// rejoin check before the stores open (rejoin.cc) connect alike.
//
// Stateless; any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/connection.h"

namespace tokimq::broker {

struct LeaderConnectionOptions {
  // The user a follower pulls as (replication_access_key / _secret_key); empty: none.
  std::string access_key;
  std::string secret_key;
  // TLS to the leader (replication_tls; default: on when this broker's own tls_mode is
  // enforcing). tls_ca_file: PEM CA(s) the leader's certificate must chain to (empty: the
  // system's CAs). tls_server_name: the name the certificate must hold (empty: the host of the
  // leader's address).
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_server_name;
};

// The client options that reach `address` (host:port) with these settings as `client_id`,
// with connect_timeout_ms for the dial, the TLS handshake, the protocol handshake and
// authentication each. Also used by the election's peer query (broker/src/group_election.h),
// so that a candidate reaches an enforcing peer over TLS.
client::ClientOptions LeaderClientOptions(const LeaderConnectionOptions& options,
                                          const std::string& address, std::string client_id,
                                          int64_t connect_timeout_ms);

// Connects to `leader` (host:port) as follower `broker_id`, within connect_timeout_ms (dial,
// TLS handshake, protocol handshake, authentication each). Errors: those of
// client::Connection::Open; without TLS, a connection the leader closes during the handshake
// gets a hint that the leader may require TLS (its tls_mode enforcing).
absl::StatusOr<std::unique_ptr<client::Connection>> OpenLeaderConnection(
    const LeaderConnectionOptions& options, const std::string& leader, int broker_id,
    int64_t connect_timeout_ms);

}  // namespace tokimq::broker
