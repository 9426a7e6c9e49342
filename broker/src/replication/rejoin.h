// Rejoin (issue 20 item 5, docs/replication.md "Rejoin"): before a follower opens its stores,
// it asks its leader for the leader's term history and cuts its own CommitLog where the two
// diverge (TermHistory::ConsistentEnd), so a deposed leader restarted as follower never keeps,
// pulls after or serves bytes the new leader does not have. What is derived from the cut bytes
// goes too: the ConsumeQueues are trimmed by the MessageStore's recovery, the timer store's
// files are removed (rebuilt from the timer topic when this replica next leads), and the
// consumer-group state in RocksDB is rebuilt by the GroupStateLog's replay (from this
// replica's own snapshot, or marked stale until the new leader's snapshot replaces it:
// group_state_log.h, docs/replication.md "Group state at a rejoin").
//
// Runs once, on the opening thread, before MessageStore::Open. Network: one connection to the
// leader (connect and request timeouts of a few seconds). Not a class: one function.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/file.h"
#include "replication/leader_connection.h"
#include "replication/term_history.h"

namespace tokimq::broker {

struct RejoinOptions {
  std::string data_dir;        // <data_dir>/store/commitlog, <data_dir>/timer
  std::string leader;          // host:port; empty: no leader known, nothing is checked
  int64_t segment_size = 0;    // CommitLog segment size (bytes)
  int broker_id = 0;           // for the leader's logs
  // Credentials (cluster admin when auth is on) and TLS, as the follower's pulls use them.
  LeaderConnectionOptions leader_connection;
  std::string history_path;    // the local term history file
};

// Returns the local term history, cut to the kept log. The leader unreachable (or refusing):
// nothing is cut, a warning is logged, and the running follower's own check
// (ReplicationService) holds back pulls from a diverged log. Errors: local file I/O, a
// corrupt history file.
absl::StatusOr<replication::TermHistory> RejoinBeforeOpen(FileSystem* fs,
                                                          const RejoinOptions& options);

}  // namespace tokimq::broker
