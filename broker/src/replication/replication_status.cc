// ReplicationService: what a replica reports of itself and the replication_role admin request
// (docs/replication.md "Roles and terms", docs/cluster.md "Status and lag"): role, term,
// CommitLog end, followers' lag, the group-state stale mark, the last pull error.
#include <mutex>
#include <string>

#include "common/logging.h"
#include "replication_service.h"

namespace tokimq::broker {

using replication::Role;

absl::Status ReplicationService::HandleRole(const proto::ReplicationRoleRequest& req,
                                            proto::ReplicationRoleResponse* resp) {
  absl::Status s;
  if (req.promote() && !req.force() && GroupStateStale()) {
    // docs/replication.md "A stale replica does not lead".
    s = absl::FailedPreconditionError(
        "this replica's consumer-group state is marked stale (its rejoin cut moved the replay "
        "position back and no leader's snapshot was replayed since): promote a replica that "
        "follows the current leader, or pass force to lead with this state");
  } else if (req.promote()) {
    if (req.force() && GroupStateStale()) {
      TOKIMQ_LOG_WARN(
          "replication: promoted to term {} with force while the group state is "
          "marked stale",
          req.term());
    }
    s = leadership_.Promote(req.term());
  } else if (!req.leader_address().empty()) {
    s = leadership_.Demote(req.term(), req.leader_address());
  }
  replication::LeadershipView v = leadership_.Current();
  resp->set_role(replication::RoleName(v.role));
  resp->set_term(v.term);
  resp->set_leader_address(v.leader_address);
  resp->set_max_offset(store_->commit_log()->MaxOffset().value());
  resp->set_follower_acked_offset(acks_.acked_offset().value());
  resp->set_replication(options_.sync ? "sync" : "async");
  resp->set_diverged(diverged_.load());
  resp->set_pull_error(pull_error());
  resp->set_group_state_stale(GroupStateStale());
  return s;
}

bool ReplicationService::GroupStateStale() const {
  if (group_state_log_ == nullptr) return false;
  // A follower's check at its first replay may not have run yet (no record copied since the
  // open, e.g. its leader is dead): run it now. A leader's state is its own.
  if (leadership_.Current().role == Role::kLeader) return group_state_log_->stale();
  absl::StatusOr<bool> stale = group_state_log_->CheckStale();
  if (!stale.ok()) {
    TOKIMQ_LOG_WARN("replication: group state stale check: {}", stale.status().ToString());
    return true;  // unknown: rank as stale (a fresh peer goes first)
  }
  return *stale;
}

int64_t ReplicationService::max_offset() const { return store_->commit_log()->MaxOffset().value(); }

void ReplicationService::GroupStatus(proto::GroupStatusResponse* resp) const {
  replication::LeadershipView v = leadership_.Current();
  resp->set_broker_id(options_.broker_id);
  resp->set_role(replication::RoleName(v.role));
  resp->set_term(v.term);
  resp->set_leader_address(v.leader_address);
  resp->set_replication(options_.sync ? "sync" : "async");
  resp->set_max_offset(store_->commit_log()->MaxOffset().value());
  resp->set_elected(options_.elected);
  resp->set_group_state_stale(GroupStateStale());
  if (v.role != Role::kLeader) {
    resp->set_pull_error(pull_error());
    return;
  }
  for (const replication::FollowerLag::Entry& e : lag_.Snapshot()) {
    proto::FollowerLag* f = resp->add_followers();
    f->set_follower(e.follower);
    f->set_acked_offset(e.acked_offset.value());
    f->set_lag_bytes(e.lag_bytes);
    f->set_lag_ms(e.lag_ms);
    f->set_last_pull_ms(e.last_pull_ms);
  }
}

void ReplicationService::SetPullError(const absl::Status& s) {
  std::lock_guard<std::mutex> l(pull_error_mu_);
  pull_error_ = s.ok() ? std::string() : s.ToString();
}

std::string ReplicationService::pull_error() const {
  std::lock_guard<std::mutex> l(pull_error_mu_);
  return pull_error_;
}

}  // namespace tokimq::broker
