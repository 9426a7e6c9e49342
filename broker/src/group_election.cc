#include "group_election.h"

#include <algorithm>
#include <map>

#include "campaign_order.h"
#include "client/connection.h"
#include "cluster/keys.h"
#include "common/clock.h"
#include "common/logging.h"
#include "fmt/format.h"
#include "replication/leader_connection.h"
#include "replication/replication_service.h"

namespace tokimq::broker {

GroupElection::GroupElection(cluster::EtcdClient* etcd, ReplicationService* replication,
                             GroupElectionOptions options)
    : etcd_(etcd), replication_(replication), options_(std::move(options)) {
  cluster::MembershipOptions m;
  m.cluster = options_.cluster;
  m.self = options_.self;
  m.ttl_s = options_.ttl_s;
  m.key = cluster::ReplicaKey(options_.cluster, options_.self.name(), options_.self.broker_id());
  replica_ = std::make_unique<cluster::Membership>(etcd_, m);

  cluster::EtcdOptions eo = etcd_->options();
  eo.timeout_ms = std::min<int64_t>(eo.timeout_ms, options_.ttl_s * 1000 / 4);
  election_etcd_ = std::move(*cluster::EtcdClient::Create(eo));  // endpoints already checked
  cluster::ElectionOptions e;
  e.cluster = options_.cluster;
  e.self = options_.self;
  e.ttl_s = options_.ttl_s;
  cluster::ElectionCallbacks cb;
  replication::Leadership* leadership = replication_->leadership();
  cb.on_elected = [this, leadership](int64_t term) {
    Post([this, leadership, term] {
      absl::Status s = leadership->Promote(term);
      if (!s.ok()) {
        TOKIMQ_LOG_ERROR("group {}: elected but cannot lead: {}", options_.self.name(),
                         s.ToString());
      }
    });
  };
  cb.on_leader = [this, leadership](int64_t term, const proto::BrokerRecord& leader) {
    Post([this, leadership, term, address = leader.address(), id = leader.broker_id()] {
      absl::Status s = leadership->Demote(term, address);
      if (!s.ok()) {
        TOKIMQ_LOG_WARN("group {}: cannot follow {}: {}", options_.self.name(), address,
                        s.ToString());
      }
      RememberGroup(id, address);  // after: an etcd read must not delay the pulls
    });
  };
  cb.on_lost = [this, leadership](int64_t term, const std::string&) {
    Post([leadership, term] { leadership->StepDown(term); });
  };
  cb.may_campaign = [this] { return MayCampaign(); };
  // Only a registered replica pulls: every follower that can acknowledge a sync write is one
  // that candidates ask before campaigning.
  cb.ready = [this] { return replica_->registered(); };
  election_ = std::make_unique<cluster::LeaderElection>(election_etcd_.get(), e, std::move(cb));
  cluster::LeaderElection* election = election_.get();
  replication_->SetLeaseCheck([election] { return election->LeaseValidNow(); });
}

GroupElection::~GroupElection() { Stop(false); }

absl::Status GroupElection::RegisterOnce() { return replica_->RegisterOnce(); }

void GroupElection::Start(std::function<void(const absl::Status&)> on_conflict) {
  apply_thread_ = std::thread([this] { ApplyLoop(); });
  replica_->Start(std::move(on_conflict));
  election_->Start();
}

void GroupElection::Stop(bool resign) {
  election_->Stop(resign);
  replica_->Stop(resign);
  {
    std::lock_guard<std::mutex> l(apply_mu_);
    apply_stop_ = true;
  }
  apply_cv_.notify_all();
  if (apply_thread_.joinable()) apply_thread_.join();
}

void GroupElection::Post(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> l(apply_mu_);
    apply_queue_.push_back(std::move(f));
  }
  apply_cv_.notify_all();
}

void GroupElection::ApplyLoop() {
  while (true) {
    std::function<void()> f;
    {
      std::unique_lock<std::mutex> l(apply_mu_);
      apply_cv_.wait(l, [&] { return apply_stop_ || !apply_queue_.empty(); });
      if (apply_queue_.empty()) return;  // stopping, nothing left
      f = std::move(apply_queue_.front());
      apply_queue_.pop_front();
    }
    f();
  }
}

absl::Status GroupElection::AskPeer(const std::string& address, CampaignRank* rank) const {
  // The replication TLS settings (a peer with tls_mode enforcing closes a plaintext
  // connection, which would read as "no answer" and stall the campaign); no user: group_status
  // needs none (broker/src/auth/permissions.cc).
  LeaderConnectionOptions peer = replication_->options().leader_connection;
  peer.access_key.clear();
  peer.secret_key.clear();
  client::ClientOptions o = LeaderClientOptions(peer, address, "tokimq-election", 500);
  o.request_timeout_ms = 500;  // the handshake too: a frozen peer must not hold the campaign
  auto conn = client::Connection::Open(o);
  if (!conn.ok()) return conn.status();
  proto::Request req;
  req.mutable_group_status();
  absl::StatusOr<proto::Response> resp = (*conn)->Call(std::move(req), 500);
  if (!resp.ok()) return resp.status();
  if (!resp->has_group_status()) return absl::InternalError("no group_status in the answer");
  if (!resp->group_status().broker_name().empty() &&
      resp->group_status().broker_name() != options_.self.name()) {
    // The address is another group's broker now (a port reused): not this peer.
    return absl::UnavailableError("another broker name at that address");
  }
  rank->commitlog_end = resp->group_status().max_offset();
  rank->broker_id = resp->group_status().broker_id();
  rank->group_state_stale = resp->group_status().group_state_stale();  // false before the field
  return absl::OkStatus();
}

std::map<int, std::string> GroupElection::OtherReplicas(const cluster::RangeResult& range,
                                                        bool* self_registered) const {
  std::map<int, std::string> out;
  if (self_registered != nullptr) *self_registered = false;
  for (const cluster::KeyValue& kv : range.kvs) {
    proto::BrokerRecord peer;
    if (!cluster::DecodeValue(kv.key, kv.value, &peer).ok()) continue;
    if (peer.address() == options_.self.address()) {
      if (self_registered != nullptr && peer.broker_id() == options_.self.broker_id()) {
        *self_registered = true;
      }
      continue;
    }
    out[peer.broker_id()] = peer.address();
  }
  return out;
}

std::map<int, std::string> GroupElection::RememberPeers(const std::map<int, std::string>& peers) {
  std::lock_guard<std::mutex> l(known_mu_);
  for (const auto& [id, address] : peers) known_peers_[id] = address;
  return known_peers_;
}

void GroupElection::RememberGroup(int leader_id, const std::string& leader_address) {
  std::map<int, std::string> seen;
  absl::StatusOr<cluster::RangeResult> peers =
      etcd_->RangePrefix(cluster::ReplicasPrefix(options_.cluster, options_.self.name()));
  if (peers.ok()) seen = OtherReplicas(*peers);
  if (leader_address != options_.self.address()) seen[leader_id] = leader_address;
  (void)RememberPeers(seen);
}

bool GroupElection::MayCampaign() {
  if (!replica_->registered()) return false;  // the id may be another broker's
  absl::StatusOr<cluster::RangeResult> peers =
      etcd_->RangePrefix(cluster::ReplicasPrefix(options_.cluster, options_.self.name()));
  if (!peers.ok()) return false;  // etcd unreachable: a campaign would fail too
  bool self_registered = false;
  const std::map<int, std::string> registered =
      OtherReplicas(*peers, &self_registered);  // registered now
  if (!self_registered) {
    // The cached flag lags a lapsed lease by up to a keepalive period (seen once: a campaign
    // 41 ms before "lease lost"); etcd's answer is the registration that counts.
    if (uint64_t held; defer_log_.Allow(SystemClock::Default()->NowMs(), &held)) {
      TOKIMQ_LOG_INFO("group {}: not campaigning: this replica's record is not in etcd (its "
                      "lease lapsed); registering again first ({} similar lines held back)",
                      options_.self.name(), held);
    }
    return false;
  }
  CampaignRank mine;
  mine.commitlog_end = replication_->max_offset();
  mine.broker_id = options_.self.broker_id();
  mine.group_state_stale = replication_->GroupStateStale();
  std::string asked;
  const std::map<int, std::string> known = RememberPeers(registered);
  // Peers seen registered before but not now: after an etcd outage every record may have
  // lapsed, and the replica whose client reconnects first would otherwise campaign alone
  // ("peers: none") with a shorter log than live peers that held acknowledged writes (found
  // 2026-12-02: a follower paused 8 s across an etcd restart won and 450 acknowledged sends
  // were cut). One that answers counts like a registered peer; one that does not answer does
  // not hold the campaign (it may be gone for good).
  for (const auto& [id, address] : known) {
    if (id == options_.self.broker_id() || registered.contains(id)) continue;
    CampaignRank theirs;
    if (!AskPeer(address, &theirs).ok()) {
      asked += fmt::format(" id {}: not registered, no answer;", id);
      continue;
    }
    if (CampaignsBefore(theirs, mine)) {
      if (uint64_t held; defer_log_.Allow(SystemClock::Default()->NowMs(), &held)) {
        TOKIMQ_LOG_INFO("group {}: not campaigning: broker id {} at {} (not registered now) "
                        "holds CommitLog end {} (this replica: {}); waiting for it to register "
                        "({} similar lines held back)",
                        options_.self.name(), id, address, theirs.commitlog_end,
                        mine.commitlog_end, held);
      }
      return false;
    }
    asked += fmt::format(" id {}: not registered, end {};", id, theirs.commitlog_end);
  }
  for (const auto& [id, address] : registered) {
    CampaignRank theirs;
    absl::Status s = AskPeer(address, &theirs);
    if (absl::IsUnavailable(s)) {
      asked += fmt::format(" id {}: down;", id);
      continue;  // refused: that process is gone; its record lapses by itself
    }
    if (!s.ok()) {
      if (uint64_t held; defer_log_.Allow(SystemClock::Default()->NowMs(), &held)) {
        TOKIMQ_LOG_INFO("group {}: not campaigning yet: peer id {} at {} did not answer ({}) "
                        "({} similar lines held back)",
                        options_.self.name(), id, address, s.ToString(), held);
      }
      return false;
    }
    if (CampaignsBefore(theirs, mine)) {
      TOKIMQ_LOG_DEBUG("group {}: deferring to broker id {} (CommitLog end {} vs {}, group "
                       "state {} vs {})",
                       options_.self.name(), theirs.broker_id, theirs.commitlog_end,
                       mine.commitlog_end, theirs.group_state_stale ? "stale" : "fresh",
                       mine.group_state_stale ? "stale" : "fresh");
      if (mine.group_state_stale && !theirs.group_state_stale) {
        if (uint64_t held; defer_log_.Allow(SystemClock::Default()->NowMs(), &held)) {
          TOKIMQ_LOG_INFO("group {}: not campaigning: this replica's group state is marked "
                          "stale and broker id {} (CommitLog end {}) can lead ({} similar "
                          "lines held back)",
                          options_.self.name(), theirs.broker_id, theirs.commitlog_end, held);
        }
      }
      return false;
    }
    asked += fmt::format(" id {}: end {}{};", theirs.broker_id, theirs.commitlog_end,
                         theirs.group_state_stale ? " (stale)" : "");
  }
  if (mine.group_state_stale) {
    TOKIMQ_LOG_ERROR("group {}: campaigning with a group state marked stale: no live peer "
                     "with a fresh state and a CommitLog as long (peers:{})",
                     options_.self.name(), asked.empty() ? " none" : asked);
  }
  TOKIMQ_LOG_INFO("group {}: campaigning with CommitLog end {} (peers:{})", options_.self.name(),
                  mine.commitlog_end, asked.empty() ? " none" : asked);
  return true;
}

}  // namespace tokimq::broker
