// GroupElection: a cluster-mode broker's place in its broker group (issue 20 item 4,
// docs/cluster.md "Broker groups").
//
// Registers this replica at /tokimq/<cluster>/replicas/<name>/<broker id> (cluster::Membership:
// one broker per (name, id); the same-address restart rule), runs the group's
// cluster::LeaderElection and turns its decisions into the ReplicationService's Leadership:
// elected -> Promote(term); another leader -> Demote(term, its address) (the follower pulls from
// it); lease lost -> StepDown(term) (writes refused, sync waits failed).
//
// A replica acts (follows a leader, i.e. pulls and so acknowledges sync writes, or campaigns)
// only while its record is registered: a replica restarted on a new address waits until its
// old record lapsed (up to the TTL). So every follower that may hold an acknowledged write is
// one the candidates below ask.
// Who campaigns: a replica whose record is registered and that no live peer outranks. Before
// each campaign it asks every other replica registered now (its record's lease alive) for its
// CommitLog end and whether its group state is stale (group_status request, 500 ms; over TLS
// with the replication TLS settings when replication_tls is on, as the pulls): a peer
// that goes first in campaign_order.h's order (a longer log; the same length and a fresh group
// state where this one is stale; else the same and a lower broker id) makes it wait. A peer
// that refuses the connection is dead and does not count; one that does not answer in time
// (overloaded, frozen, cut off) defers the campaign until it answers or its record lapses
// (within the TTL). (end, stale, id) orders the rest totally, so the first of them always
// campaigns. Replicas this process saw registered before but that are not registered now (all
// records lapse in an etcd outage; the first replica back must not campaign alone) are asked
// too: one that answers with a longer log defers the campaign; one that does not answer is
// ignored.
//
// The Leadership calls run in order on this object's own thread, not on the election thread:
// a promotion starts the leader's services (timer store recovery among them), which must not
// hold up the lease keepalives. Until it ran, the write path's lease check still fences.
// Thread-safety: accessors from any thread. Lifetime:
// the EtcdClient and the ReplicationService outlive it; Stop before they go.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "campaign_order.h"
#include "cluster/etcd_client.h"
#include "cluster/leader_election.h"
#include "cluster/membership.h"
#include "common/log_limiter.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {

class ReplicationService;

struct GroupElectionOptions {
  std::string cluster;
  proto::BrokerRecord self;  // name, address, grpc_address, broker_id
  int64_t ttl_s = 10;        // the replica record's and the leader key's lease
};

class GroupElection {
 public:
  GroupElection(cluster::EtcdClient* etcd, ReplicationService* replication,
                GroupElectionOptions options);
  ~GroupElection();

  // One registration attempt of the replica record (its status), then the keepalive thread
  // and the election. on_conflict: see cluster::Membership::Start.
  absl::Status RegisterOnce();
  void Start(std::function<void(const absl::Status&)> on_conflict);
  // resign: revoke both leases (the record and, when leading, the leader key go at once).
  void Stop(bool resign);

  bool registered() const { return replica_->registered(); }
  bool etcd_reachable() const { return replica_->etcd_reachable(); }
  const cluster::LeaderElection& election() const { return *election_; }

 private:
  bool MayCampaign();
  // The other replicas' records in `range` (the group's replicas prefix): broker id -> address.
  // *self_registered (when given): whether `range` holds this replica's own record (same
  // address and broker id).
  std::map<int, std::string> OtherReplicas(const cluster::RangeResult& range,
                                           bool* self_registered = nullptr) const;
  // Adds `peers` to known_peers_ and returns all of it.
  std::map<int, std::string> RememberPeers(const std::map<int, std::string>& peers);
  // Remembers the leader and every replica registered now (apply thread, at each new leader:
  // a follower that never campaigned knows its peers before an etcd outage).
  void RememberGroup(int leader_id, const std::string& leader_address);
  // Queues a Leadership call for the apply thread (in order).
  void Post(std::function<void()> f);
  void ApplyLoop();
  // The CommitLog end, broker id and group-state staleness a peer reports: OK, kUnavailable
  // when it refused the connection (dead), another error when it did not answer in time.
  absl::Status AskPeer(const std::string& address, CampaignRank* rank) const;

  cluster::EtcdClient* etcd_;
  // The election's own client: a short per-call timeout (at most ttl / 4) so that a hanging
  // keepalive cannot outlast the lease fence's margin (cluster/leader_election.h).
  std::unique_ptr<cluster::EtcdClient> election_etcd_;
  ReplicationService* replication_;
  GroupElectionOptions options_;
  std::unique_ptr<cluster::Membership> replica_;
  std::unique_ptr<cluster::LeaderElection> election_;
  // Every other replica of the group seen registered since this process started (broker id ->
  // its last address; read at each new leader and at each campaign check): MayCampaign also
  // asks those not registered now.
  std::mutex known_mu_;
  std::map<int, std::string> known_peers_;  // known_mu_
  // MayCampaign runs every 100 ms while no leader is known: its "not campaigning" lines get
  // one per 5 s (an etcd outage logged ~10 a second per replica before).
  LogLimiter defer_log_{1, 5'000};
  std::mutex apply_mu_;
  std::condition_variable apply_cv_;
  std::deque<std::function<void()>> apply_queue_;  // apply_mu_
  bool apply_stop_ = false;                        // apply_mu_
  std::thread apply_thread_;
};

}  // namespace tokimq::broker
