// Leadership: who leads this broker group, in which term (issue 20, docs/replication.md).
//
// The seam between the replication core and whatever elects leaders. Today the decisions come
// from static configuration (--broker-id 0 starts as leader of term 0, other ids as followers
// of --replicate-from) and from the admin Promote/Demote request; the etcd election of issue 19
// will call Promote / Demote with the term it won (an etcd revision-based counter), nothing
// else changes.
//
// Fencing (the RocketMQ controller's epoch, Raft's term): every replication message carries
// the sender's term. ObserveTerm records a newer term than this replica has seen; a leader that
// observes one steps down at once (it stops acknowledging writes). Promote and Demote only move
// the term forward: a decision for an older term than the one seen is refused.
//
// Thread-safety: every method may be called from any thread. Listeners run on the thread that
// changed the view, after the change, outside the internal lock; they must not call Promote,
// Demote or ObserveTerm. Durability: the term is held in memory; after a restart a replica
// learns it again from its leader (or, later, from etcd).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tokimq::replication {

enum class Role { kLeader, kFollower };

const char* RoleName(Role role);

struct LeadershipView {
  Role role = Role::kFollower;
  int64_t term = 0;            // the newest term this replica has seen
  std::string leader_address;  // host:port of the leader to pull from (followers); may be empty
};

class Leadership {
 public:
  // role kLeader when `leader_address` is empty (broker id 0 in the static configuration).
  Leadership(Role role, int64_t term, std::string leader_address);

  LeadershipView Current() const;
  bool IsLeaderOf(int64_t term) const;

  // A term carried by a peer's replication message. Newer than ours: recorded, and a leader
  // becomes a follower with no leader known (it must not acknowledge writes any more). Returns
  // true when the message's term is acceptable (>= ours), false when it is older (fenced).
  bool ObserveTerm(int64_t term);

  // This replica leads from `term` on. kFailedPrecondition unless term > the seen term (a term
  // has at most one leader: the one that was given it) — or term == the seen term when that
  // term was only observed (ObserveTerm), never led, stepped down from or followed here: the
  // followers of an elected replica learn its term from etcd and may pull from it (carrying
  // the term) before its own promotion is applied (found 2026-12-02: the winner then refused
  // its term and the group had no leader until it was restarted).
  absl::Status Promote(int64_t term);
  // This replica follows `leader_address` in `term`. kFailedPrecondition if term < the seen
  // term, or if term == the seen term while this replica leads it; kInvalidArgument for an
  // empty address.
  absl::Status Demote(int64_t term, std::string leader_address);

  // The leader of `term` may no longer act as leader (its etcd election lease may have expired,
  // docs/cluster.md "Election and fencing"): it becomes a follower with no leader known, term
  // unchanged, so it refuses writes and fails pending sync waits until the election names the
  // next leader (Demote) or elects it again in a newer term (Promote). No-op, false, unless it
  // leads `term`.
  bool StepDown(int64_t term);

  using Listener = std::function<void(const LeadershipView&)>;
  void Subscribe(Listener listener);

 private:
  void Notify(const LeadershipView& view);

  mutable std::mutex mu_;
  LeadershipView view_;  // guarded by mu_
  // view_.term came from ObserveTerm alone: this replica has not led, stepped down from or
  // followed a named leader in it. Guarded by mu_.
  bool term_only_observed_ = false;
  std::mutex listeners_mu_;
  std::vector<Listener> listeners_;  // guarded by listeners_mu_
};

}  // namespace tokimq::replication
