#include "rejoin.h"

#include <limits>
#include <vector>

#include "client/connection.h"
#include "commitlog/commit_log.h"
#include "common/logging.h"
#include "common/status.h"
#include "fmt/format.h"

namespace tokimq::broker {
namespace {

// Removes `path` if it is a file, else every file below it (directories stay, empty:
// FileSystem::Remove unlinks files only).
absl::Status RemoveFilesUnder(FileSystem* fs, const std::string& path) {
  if (!fs->Exists(path)) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> names = fs->ListDir(path);
  if (!names.ok()) return fs->Remove(path);
  for (const std::string& n : *names) {
    TOKIMQ_RETURN_IF_ERROR(RemoveFilesUnder(fs, path + "/" + n));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::ReplicatePullResponse> LeaderHistory(const RejoinOptions& o,
                                                           int64_t term) {
  client::ClientOptions c;
  c.broker = o.leader;
  c.connect_timeout_ms = 3000;
  c.client_id = fmt::format("tokimq-follower-{}", o.broker_id);
  c.access_key = o.access_key;
  c.secret_key = o.secret_key;
  TOKIMQ_ASSIGN_OR_RETURN(auto conn, client::Connection::Open(c));
  proto::Request req;
  auto* pull = req.mutable_replicate_pull();
  pull->set_term(term);
  pull->set_segment_size(o.segment_size);
  pull->set_follower(std::to_string(o.broker_id));
  pull->set_with_history(true);
  TOKIMQ_ASSIGN_OR_RETURN(proto::Response resp, conn->Call(std::move(req), 5000));
  return resp.replicate_pull();
}

}  // namespace

absl::StatusOr<replication::TermHistory> RejoinBeforeOpen(FileSystem* fs,
                                                          const RejoinOptions& o) {
  TOKIMQ_ASSIGN_OR_RETURN(replication::TermHistory local,
                          replication::LoadTermHistory(fs, o.history_path));
  if (o.leader.empty()) return local;
  absl::StatusOr<proto::ReplicatePullResponse> r = LeaderHistory(o, local.LastTerm());
  if (!r.ok()) {
    TOKIMQ_LOG_WARN("rejoin: no term history from leader {} ({}); the log is checked again "
                    "before the first pull",
                    o.leader, r.status().ToString());
    return local;
  }
  std::vector<replication::TermStart> theirs;
  for (const auto& e : r->history()) {
    theirs.push_back({e.term(), PhysicalOffset(e.start_offset())});
  }
  const replication::TermHistory leader(std::move(theirs));
  // The local end is not known before recovery: with an unbounded end the answer is the end
  // of the last common term on the leader's side, and a shorter local log is not cut.
  const PhysicalOffset keep =
      local.ConsistentEnd(PhysicalOffset(std::numeric_limits<int64_t>::max()), leader,
                          PhysicalOffset(r->leader_max_offset()));
  TOKIMQ_ASSIGN_OR_RETURN(int64_t removed,
                          CommitLog::TruncateFiles(fs, o.data_dir + "/store/commitlog",
                                                   o.segment_size, keep));
  if (removed == 0) return local;
  TOKIMQ_LOG_WARN(
      "rejoin: cut {} bytes of CommitLog past offset {} that leader {} (term {}) does not hold; "
      "the timer store is rebuilt from the timer topic",
      removed, keep, o.leader, r->term());
  TOKIMQ_RETURN_IF_ERROR(RemoveFilesUnder(fs, o.data_dir + "/timer"));
  std::vector<replication::TermStart> kept;
  for (const replication::TermStart& e : local.entries()) {
    if (e.start_offset <= keep) kept.push_back(e);
  }
  replication::TermHistory cut(std::move(kept));
  TOKIMQ_RETURN_IF_ERROR(replication::StoreTermHistory(fs, o.history_path, cut));
  return cut;
}

}  // namespace tokimq::broker
