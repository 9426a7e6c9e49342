// The broker's two decisions about consumer-group state replication (issue 20 item 1,
// docs/replication.md "Consumer-group state"): whether this broker logs its group state into
// the CommitLog at all, and what the start of serving does with it. Kept out of broker.cc.
// Thread-safety: called from Broker's start-up / promotion path only.
#pragma once

#include "absl/status/status.h"
#include "broker/broker.h"
#include "broker/consumer_service.h"
#include "replication/group_state_log.h"

namespace tokimq::broker {

// Whether the broker belongs to a replicated group, so its consumer-group state goes into the
// CommitLog as system records: a follower id, a leader to follow, sync replication, a
// replication mode given explicitly (`--replication async` / TOML `replication = "async"`),
// the etcd election, or the restart of a deposed leader. A broker id 0 with the replication
// mode left unset is a single node and writes no records (they cost an extra CommitLog append
// per receive and ack, for nobody).
bool ReplicatesGroupState(const BrokerOptions& o);

// StartServing's first step. A promoted follower replays what is left of its leader's
// group-state records and reloads the consumer service from them; then every leader stops
// replaying and logs its whole group state once (what was written before logging started,
// e.g. the receipt-handle secret created at the first open). No-op when `log` is null.
// Errors: CatchUp's, ReloadState's, AppendSnapshot's; INTERNAL when `consumers` is not the
// ConsumerServiceImpl (the only implementation).
absl::Status ServeGroupState(GroupStateLog* log, ConsumerService* consumers, bool promoted);

}  // namespace tokimq::broker
