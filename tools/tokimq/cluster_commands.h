// The cluster side of the `tokimq` CLI (docs/cluster.md): `tokimq cluster status`, and the
// routing forms of send / consume / recall / ack / nack / renew used when --broker names a
// broker of a cluster (any one: the route comes from its etcd view).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "client/connection.h"
#include "client/producer.h"
#include "tokimq/commands.h"

namespace tokimq::cli {

// True when the broker at o.broker is a cluster member (it runs with --cluster: its group
// status names its broker group), false when it says it is not. A failure to ask (unreachable,
// timeout, a member busy restarting) is returned: a cluster member must not be driven as a
// single node (its answers as a follower would not be retried at the leader).
absl::StatusOr<bool> InCluster(const client::ClientOptions& o);
// True for a handle printed by a routing command ("<broker>|<handle>").
bool IsClusterHandle(const std::string& handle);

// Members (address, gRPC address, health by a ping of each), topics and their placement.
absl::Status ClusterStatus(const client::ClientOptions& o);
// `base` is the message built from the arguments; a body (or file) sends one message, else
// one per stdin line in batches of a.batch (one request at a time).
absl::Status ClusterSend(const client::ClientOptions& o, const SendArgs& a,
                         const client::OutgoingMessage& base, const std::string* body);
absl::Status ClusterConsume(const client::ClientOptions& o, const ConsumeArgs& a);
absl::Status ClusterRecall(const client::ClientOptions& o, const std::string& handle);
// kind: "ack", "nack" or "renew" (as AckHandles / NackHandle / RenewHandle).
absl::Status ClusterSettle(const client::ClientOptions& o, const SettleArgs& a,
                           const std::string& kind);

}  // namespace tokimq::cli
