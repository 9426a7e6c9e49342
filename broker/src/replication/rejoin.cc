#include "rejoin.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "client/connection.h"
#include "commitlog/commit_log.h"
#include "common/clock.h"
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

// The base offset of the newest CommitLog segment file in `dir` (20 digits), -1 with none.
absl::StatusOr<int64_t> NewestSegmentBase(FileSystem* fs, const std::string& dir) {
  if (!fs->Exists(dir)) return -1;
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<std::string> names, fs->ListDir(dir));
  int64_t newest = -1;
  for (const std::string& n : names) {
    if (n.size() != 20 || n.find_first_not_of("0123456789") != std::string::npos) continue;
    newest = std::max<int64_t>(newest, std::stoll(n));
  }
  return newest;
}

// docs/replication.md "A follower behind the leader's retention": moves <data_dir>/store (the
// CommitLog, its ConsumeQueues and checkpoints) and <data_dir>/timer aside into
// <data_dir>/replaced-<ms>/, then creates an empty CommitLog whose first segment file starts
// at `base`, so recovery opens a log with MinOffset = MaxOffset = base.
absl::Status StartLogAt(FileSystem* fs, const RejoinOptions& o, int64_t base) {
  const std::string aside = fmt::format("{}/replaced-{}", o.data_dir,
                                        SystemClock::Default()->NowMs());
  bool moved = false;
  for (const char* sub : {"store", "timer"}) {
    const std::string from = o.data_dir + "/" + sub;
    if (!fs->Exists(from)) continue;
    TOKIMQ_RETURN_IF_ERROR(fs->CreateDirs(aside));
    TOKIMQ_RETURN_IF_ERROR(fs->Rename(from, aside + "/" + sub));
    moved = true;
  }
  if (moved) TOKIMQ_RETURN_IF_ERROR(fs->SyncDir(o.data_dir));
  const std::string dir = o.data_dir + "/store/commitlog";
  TOKIMQ_RETURN_IF_ERROR(fs->CreateDirs(dir));
  TOKIMQ_ASSIGN_OR_RETURN(std::unique_ptr<File> seg,
                          fs->Open(fmt::format("{}/{:020d}", dir, base), OpenMode::kTruncate));
  TOKIMQ_RETURN_IF_ERROR(seg->Sync());
  TOKIMQ_RETURN_IF_ERROR(fs->SyncDir(dir));
  TOKIMQ_LOG_WARN(
      "rejoin: this CommitLog lies wholly below the oldest offset {} of leader {} (its "
      "retention removed the rest): {}the CommitLog starts empty at offset {} and copies the "
      "leader's log from there; consumer-group state is stale until a snapshot is copied",
      base, o.leader, moved ? fmt::format("the old store moved aside to {}; ", aside) : "",
      base);
  return absl::OkStatus();
}

absl::StatusOr<proto::ReplicatePullResponse> LeaderHistory(const RejoinOptions& o,
                                                           int64_t term) {
  TOKIMQ_ASSIGN_OR_RETURN(auto conn,
                          OpenLeaderConnection(o.leader_connection, o.leader, o.broker_id, 3000));
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
  // Behind the leader's retention: every local segment ends at or below the leader's oldest
  // offset (a segment base, so a local segment either lies wholly below it or not).
  const int64_t leader_min = r->leader_min_offset();
  if (leader_min > 0) {
    TOKIMQ_ASSIGN_OR_RETURN(int64_t newest,
                            NewestSegmentBase(fs, o.data_dir + "/store/commitlog"));
    if (newest < 0 || newest + o.segment_size <= leader_min) {
      TOKIMQ_RETURN_IF_ERROR(StartLogAt(fs, o, leader_min));
      // The copied log's terms are the leader's: CheckHistory takes its history.
      replication::TermHistory none;
      TOKIMQ_RETURN_IF_ERROR(replication::StoreTermHistory(fs, o.history_path, none));
      return none;
    }
  }
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
