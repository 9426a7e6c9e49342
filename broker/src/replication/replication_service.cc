#include "replication_service.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "client/connection.h"
#include "common/leadership_status.h"
#include "common/logging.h"
#include "fmt/format.h"

namespace tokimq::broker {

using replication::Role;

namespace {

// Cluster mode (`elected`): every replica starts as a follower with no leader; the election
// decides (docs/cluster.md "Broker groups").
bool StartsAsLeader(const ReplicationOptions& o) {
  return o.broker_id == 0 && !o.elected && !o.deposed && o.history.LastTerm() <= 0;
}

}  // namespace

struct ReplicationService::PullState {
  std::string leader;  // the address `conn` is connected to
  std::unique_ptr<client::Connection> conn;
  bool logged_error = false;  // one warning per episode of failed pulls
  int64_t checked_term = -1;  // the leader term whose history this log was checked against
};

ReplicationService::ReplicationService(ReplicationOptions options, MessageStore* store,
                                       std::function<absl::Status(bool)> start_serving)
    : options_(std::move(options)),
      store_(store),
      start_serving_(std::move(start_serving)),
      // A broker id 0 whose history shows a later term than 0 was deposed: it follows (the
      // election, or an admin request, tells it whom) and never claims a term it did not win.
      leadership_(StartsAsLeader(options_) ? Role::kLeader : Role::kFollower,
                  std::max<int64_t>(0, options_.history.LastTerm()),
                  StartsAsLeader(options_) || options_.elected ? "" : options_.replicate_from),
      acks_(SystemClock::Default()),
      lag_(SystemClock::Default()),
      history_(options_.history),
      pull_(std::make_unique<PullState>()) {
  if (options_.group_state_db != nullptr) {
    group_state_log_ = std::make_unique<GroupStateLog>(
        store_, options_.group_state_db,
        options_.clock != nullptr ? options_.clock : SystemClock::Default());
    group_state_log_->SetWriteCheck([this] { return Leads(); });
  }
}

ReplicationService::~ReplicationService() { Stop(); }

absl::Status ReplicationService::Start() {
  if (options_.broker_id != 0 && options_.replicate_from.empty() && !options_.elected) {
    return absl::InvalidArgumentError(fmt::format(
        "broker id {} is a follower: it needs replicate_from (--replicate-from HOST:PORT)",
        options_.broker_id));
  }
  {
    std::lock_guard<std::mutex> l(serving_mu_);
    // A replica that does not lead from the start (any id but a first-time broker id 0) was
    // written by another leader: its promotion adopts the log and reloads group state.
    followed_ = !StartsAsLeader(options_);
  }
  leadership_.Subscribe([this](const replication::LeadershipView& v) { OnViewChange(v); });
  if (leadership_.Current().role == Role::kLeader) OnViewChange(leadership_.Current());
  puller_ = std::thread([this] { PullLoop(); });
  expirer_ = std::thread([this] { ExpiryLoop(); });
  return absl::OkStatus();
}

void ReplicationService::Stop() {
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    if (stop_) return;
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (puller_.joinable()) puller_.join();
  if (expirer_.joinable()) expirer_.join();
  acks_.Fail(absl::UnavailableError("broker shutting down"));
}

void ReplicationService::OnViewChange(const replication::LeadershipView& view) {
  if (view.role != Role::kLeader) {
    bool served = false;
    {
      std::lock_guard<std::mutex> l(serving_mu_);
      followed_ = true;
      served = serving_;
    }
    acks_.Fail(absl::UnavailableError(
        fmt::format("this broker no longer leads its group (term {})", view.term)));
    TOKIMQ_LOG_WARN("replication: follower of {} in term {}",
                    view.leader_address.empty() ? "(leader unknown)" : view.leader_address,
                    view.term);
    // Its consumer service and timer store hold the state of its own term: the new leader's
    // acks and releases would not reach them. Only a restart brings them back from disk.
    if (served) RequestRestart(view.leader_address, fmt::format("deposed in term {}", view.term));
    return;
  }
  BeginTerm(view.term);
  acks_.Reset(PhysicalOffset(0));
  lag_.Reset();
  lag_.OnLeaderEnd(store_->commit_log()->MaxOffset());
  TOKIMQ_LOG_INFO("replication: leader of term {} at CommitLog offset {}", view.term,
                  store_->commit_log()->MaxOffset().value());
  std::lock_guard<std::mutex> l(serving_mu_);
  if (serving_) return;
  serving_ = true;
  absl::Status s = start_serving_(followed_);
  if (!s.ok()) TOKIMQ_LOG_ERROR("replication: starting the leader's services: {}", s.ToString());
  ready_.store(true);
}

void ReplicationService::BeginTerm(int64_t term) {
  std::lock_guard<std::mutex> l(append_mu_);
  const PhysicalOffset end = store_->commit_log()->MaxOffset();
  absl::Status s = history_.BeginTerm(term, history_.empty() ? PhysicalOffset(0) : end);
  if (s.ok() && options_.fs != nullptr && !options_.history_path.empty()) {
    s = StoreTermHistory(options_.fs, options_.history_path, history_);
  }
  if (!s.ok()) TOKIMQ_LOG_ERROR("replication: term history for term {}: {}", term, s.ToString());
}

bool ReplicationService::Leads() const {
  return leadership_.Current().role == Role::kLeader && (!lease_valid_ || lease_valid_());
}

absl::Status ReplicationService::CheckWritable() const {
  replication::LeadershipView v = leadership_.Current();
  if (v.role == Role::kLeader) {
    if (!ready_.load()) return BecomingLeaderError(v.term);
    if (!lease_valid_ || lease_valid_()) return absl::OkStatus();
    return LeaseMayHaveExpiredError(v.term);
  }
  return FollowerError(v.term, v.leader_address);
}

void ReplicationService::WhenReplicated(PhysicalOffset end, replication::AckTracker::Done done) {
  if (!options_.sync) return std::move(done)(absl::OkStatus());
  acks_.WhenReplicated(end, options_.ack_timeout_ms, std::move(done));
}

absl::Status ReplicationService::HandlePull(const proto::ReplicatePullRequest& req,
                                            proto::ReplicatePullResponse* resp) {
  if (!leadership_.ObserveTerm(req.term())) {
    // Our term is newer: the follower learns it from the response and its next pull carries it.
  }
  replication::LeadershipView v = leadership_.Current();
  resp->set_term(v.term);
  // A leader past its lease fence serves no more bytes: what it wrote since (timer releases,
  // consumer state) was acknowledged to no one and must not reach a follower.
  if (v.role != Role::kLeader || (lease_valid_ && !lease_valid_())) {
    return absl::FailedPreconditionError(
        fmt::format("not the leader (term {}, leader {})", v.term, v.leader_address));
  }
  CommitLog* log = store_->commit_log();
  if (req.segment_size() != static_cast<int64_t>(options_.segment_size)) {
    return absl::FailedPreconditionError(
        fmt::format("follower segment size {} differs from the leader's {}", req.segment_size(),
                    options_.segment_size));
  }
  const int64_t max = log->MaxOffset().value();
  resp->set_leader_min_offset(log->MinOffset().value());
  if (req.with_history()) {
    std::lock_guard<std::mutex> l(append_mu_);
    for (const replication::TermStart& e : history_.entries()) {
      auto* h = resp->add_history();
      h->set_term(e.term);
      h->set_start_offset(e.start_offset.value());
    }
    resp->set_offset(req.from_offset());
    resp->set_leader_max_offset(max);
    return absl::OkStatus();
  }
  absl::StatusOr<ReplicaChunk> chunk =
      log->ReadChunk(PhysicalOffset(req.from_offset()), req.max_bytes());
  if (!chunk.ok()) return chunk.status();
  // The follower holds every byte below from_offset (a follower of this term, behind our end).
  lag_.OnLeaderEnd(PhysicalOffset(max));
  if (req.term() == v.term) {
    acks_.OnFollowerAck(PhysicalOffset(req.from_offset()));
    lag_.OnPull(req.follower(), PhysicalOffset(req.from_offset()));
  }
  resp->set_offset(chunk->offset.value());
  resp->set_data(std::move(chunk->bytes));
  resp->set_leader_max_offset(max);
  return absl::OkStatus();
}

absl::Status ReplicationService::LogStateWrite(const rocksdb::WriteBatch& batch) {
  if (group_state_log_ == nullptr) return absl::OkStatus();
  if (!Leads()) {
    return absl::FailedPreconditionError(
        "this broker does not lead its group: consumer-group state is written by the leader");
  }
  return group_state_log_->Append(batch);
}

void ReplicationService::OnGroupStateDispatch() {
  if (group_state_log_ == nullptr) return;
  absl::Status s = group_state_log_->CatchUp();
  if (!s.ok()) TOKIMQ_LOG_ERROR("replication: replaying group-state records: {}", s.ToString());
}

namespace {
// The innermost DeferStateWaits of this thread (its `end`); nullptr: AwaitStateReplicated waits.
thread_local PhysicalOffset* t_deferred_end = nullptr;
}  // namespace

ReplicationService::DeferStateWaits::DeferStateWaits(PhysicalOffset* end)
    : previous_(t_deferred_end) {
  t_deferred_end = end;
}

ReplicationService::DeferStateWaits::~DeferStateWaits() { t_deferred_end = previous_; }

absl::Status ReplicationService::AwaitStateReplicated() {
  if (group_state_log_ == nullptr || !options_.sync) return absl::OkStatus();
  if (t_deferred_end != nullptr) {
    // The request's records are appended by now: the end covers them.
    *t_deferred_end = std::max(*t_deferred_end, store_->commit_log()->MaxOffset());
    return absl::OkStatus();
  }
  return AwaitReplicated();
}

absl::Status ReplicationService::AwaitReplicated() {
  if (!options_.sync) return absl::OkStatus();
  const PhysicalOffset end = store_->commit_log()->MaxOffset();
  std::promise<absl::Status> replicated;
  std::future<absl::Status> done = replicated.get_future();
  acks_.WhenReplicated(end, options_.ack_timeout_ms,
                       [&replicated](absl::Status s) { replicated.set_value(s); });
  return done.get();
}

bool ReplicationService::RequestRestart(const std::string& leader, const std::string& reason) {
  if (!options_.on_restart) return false;
  if (restart_requested_.exchange(true)) return true;
  TOKIMQ_LOG_WARN(
      "replication: restarting this broker ({}): it comes back as a follower of {} (rejoin "
      "check, group state replay, timer store from disk) unless it is stopping",
      reason, leader.empty() ? "the leader it is told to follow" : leader);
  options_.on_restart(leader, reason);
  return true;
}

void ReplicationService::Pause(int64_t ms) {
  std::unique_lock<std::mutex> l(stop_mu_);
  stop_cv_.wait_for(l, std::chrono::milliseconds(ms), [this] { return stop_; });
}

void ReplicationService::PullLoop() {
  while (true) {
    {
      std::lock_guard<std::mutex> l(stop_mu_);
      if (stop_) break;
    }
    replication::LeadershipView v = leadership_.Current();
    if (v.role == Role::kLeader || v.leader_address.empty()) {
      pull_->conn.reset();
      Pause(50);
      continue;
    }
    if (!PullOnce(v.leader_address)) Pause(options_.idle_pull_interval_ms);
  }
  pull_->conn.reset();
}

bool ReplicationService::PullOnce(const std::string& leader) {
  PullState& p = *pull_;
  auto fail = [&p](const absl::Status& s, int64_t pause_ms, ReplicationService* self) {
    if (!p.logged_error) {
      TOKIMQ_LOG_WARN("replication: pulling from {}: {}", p.leader, s.ToString());
      p.logged_error = true;
    }
    self->SetPullError(s);
    // Below the leader's retention: the history check (next connection) compares this log's
    // end with the leader's oldest offset and restarts this broker to start there.
    if (absl::IsNotFound(s)) p.checked_term = -1;
    p.conn.reset();
    self->Pause(pause_ms);
    return true;
  };
  if (p.conn == nullptr || p.conn->broken() || p.leader != leader) {
    p.leader = leader;
    auto conn = OpenLeaderConnection(options_.leader_connection, leader, options_.broker_id, 1000);
    if (!conn.ok()) return fail(conn.status(), 100, this);
    p.conn = std::move(*conn);
    p.checked_term = -1;
  }
  if (p.checked_term < 0 && !CheckHistory()) return true;  // CheckHistory paused
  const int64_t from = store_->commit_log()->MaxOffset().value();
  proto::Request req;
  auto* pull = req.mutable_replicate_pull();
  pull->set_term(leadership_.Current().term);
  pull->set_from_offset(from);
  pull->set_max_bytes(options_.pull_bytes);
  pull->set_segment_size(static_cast<int64_t>(options_.segment_size));
  pull->set_follower(std::to_string(options_.broker_id));
  absl::StatusOr<proto::Response> resp = p.conn->Call(std::move(req), 5000);
  if (!resp.ok()) return fail(resp.status(), 100, this);
  const proto::ReplicatePullResponse& r = resp->replicate_pull();
  if (!leadership_.ObserveTerm(r.term())) {
    return fail(absl::FailedPreconditionError(
                    fmt::format("refused data of term {}: term {} was seen (fenced)", r.term(),
                                leadership_.Current().term)),
                100, this);
  }
  if (r.term() != p.checked_term) {  // a new leader term: check the history again first
    p.checked_term = -1;
    return true;
  }
  if (r.data().empty()) {
    SetPullError(absl::OkStatus());
    return false;
  }
  ReplicaChunk chunk{PhysicalOffset(r.offset()), r.data()};
  absl::StatusOr<PhysicalOffset> end;
  {
    std::lock_guard<std::mutex> l(append_mu_);
    end = store_->AppendReplicated(chunk);
  }
  if (!end.ok()) return fail(end.status(), 100, this);
  if (p.logged_error) {
    TOKIMQ_LOG_INFO("replication: pulling from {} again at offset {}", p.leader, from);
    p.logged_error = false;
  }
  SetPullError(absl::OkStatus());
  return true;
}

bool ReplicationService::CheckHistory() {
  PullState& p = *pull_;
  proto::Request req;
  auto* pull = req.mutable_replicate_pull();
  pull->set_term(leadership_.Current().term);
  pull->set_from_offset(store_->commit_log()->MaxOffset().value());
  pull->set_segment_size(static_cast<int64_t>(options_.segment_size));
  pull->set_follower(std::to_string(options_.broker_id));
  pull->set_with_history(true);
  absl::StatusOr<proto::Response> resp = p.conn->Call(std::move(req), 5000);
  absl::Status error = resp.status();
  if (error.ok() && !leadership_.ObserveTerm(resp->replicate_pull().term())) {
    error = absl::FailedPreconditionError("history of an older term (fenced)");
  }
  if (!error.ok()) {
    if (!p.logged_error) {
      TOKIMQ_LOG_WARN("replication: term history from {}: {}", p.leader, error.ToString());
      p.logged_error = true;
    }
    SetPullError(error);
    p.conn.reset();
    Pause(100);
    return false;
  }
  const proto::ReplicatePullResponse& r = resp->replicate_pull();
  std::vector<replication::TermStart> theirs;
  for (const auto& e : r.history()) {
    theirs.push_back({e.term(), PhysicalOffset(e.start_offset())});
  }
  const replication::TermHistory leader(std::move(theirs));
  // Only this (the puller) thread appends to a follower's log: its end is stable here.
  if (const PhysicalOffset end = store_->commit_log()->MaxOffset();
      end.value() < r.leader_min_offset()) {
    // Nothing this log could pull is on the leader any more (its retention removed it): only a
    // restart can start the CommitLog at the leader's oldest segment (RejoinBeforeOpen moves
    // this log aside). docs/replication.md "A follower behind the leader's retention".
    const absl::Status behind = absl::NotFoundError(fmt::format(
        "this CommitLog ends at offset {}, below the oldest offset {} leader {} still holds "
        "(its retention removed the rest): {}",
        end.value(), r.leader_min_offset(), p.leader,
        options_.on_restart ? "restarting to copy from that offset (this log is moved aside)"
                            : "cannot catch up (no restart handler)"));
    if (!p.logged_error) {
      TOKIMQ_LOG_ERROR("replication: {}", std::string(behind.message()));
      p.logged_error = true;
    }
    SetPullError(behind);
    RequestRestart(p.leader, fmt::format("its CommitLog ends below the oldest offset {} of {}",
                                         r.leader_min_offset(), p.leader));
    Pause(1000);
    return false;
  }
  std::lock_guard<std::mutex> l(append_mu_);
  const PhysicalOffset end = store_->commit_log()->MaxOffset();
  const PhysicalOffset consistent =
      history_.ConsistentEnd(end, leader, PhysicalOffset(r.leader_max_offset()));
  if (consistent < end) {
    if (!diverged_.exchange(true)) {
      TOKIMQ_LOG_ERROR(
          "replication: this CommitLog diverged from the leader {} (term {}) at offset {} (its "
          "end is {}): not pulling; a restart truncates the {} diverged bytes",
          p.leader, r.term(), consistent, end, end - consistent);
      RequestRestart(p.leader, fmt::format("its CommitLog diverged from {} at offset {}", p.leader,
                                           consistent));
    }
    Pause(1000);
    return false;
  }
  diverged_ = false;
  if (!(leader.entries() == history_.entries())) {
    history_ = leader;
    if (options_.fs != nullptr && !options_.history_path.empty()) {
      absl::Status s = StoreTermHistory(options_.fs, options_.history_path, history_);
      if (!s.ok()) TOKIMQ_LOG_ERROR("replication: storing the term history: {}", s.ToString());
    }
  }
  p.checked_term = r.term();
  return true;
}

void ReplicationService::ExpiryLoop() {
  while (true) {
    {
      std::lock_guard<std::mutex> l(stop_mu_);
      if (stop_) return;
    }
    acks_.ExpireWaits();
    if (leadership_.Current().role == Role::kLeader) {
      lag_.OnLeaderEnd(store_->commit_log()->MaxOffset());
    }
    Pause(10);
  }
}

}  // namespace tokimq::broker
