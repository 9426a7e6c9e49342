// ReplicationService: a broker's part in its broker group (issue 20, docs/replication.md).
//
// Leader: answers followers' pulls with chunks of its CommitLog (CommitLog::ReadChunk), takes
// each pull's from_offset as that follower's acknowledgement, and, with replication = sync,
// holds a send's answer until a follower acknowledged its bytes (AckTracker). A pull carrying a
// newer term deposes it: waits fail, writes are refused from then on.
// Follower: one thread pulls from the leader named by Leadership and appends each chunk with
// MessageStore::AppendReplicated (checked record by record, ConsumeQueues rebuilt). It refuses a
// chunk from an older term than it has seen. A follower does not serve clients' writes and does
// not run the timer, consumer, transaction or retention services (they write to the CommitLog);
// promotion starts them (start_serving).
// Deposed leader: its services, started once per process, hold in-memory state the next
// leader makes stale; so a replica that served and is deposed (Demote, StepDown, a newer term
// seen) asks for a restart (options.on_restart) and comes back through the follower path, as
// does a follower whose log diverged from its leader's (the restart cuts the tail).
//
// Owned by the Broker; Start after the stores opened, Stop before they close. Thread-safety:
// every public method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "commitlog/message_store.h"
#include "common/clock.h"
#include "common/file.h"
#include "proto/tokimq.pb.h"
#include "replication/ack_tracker.h"
#include "replication/follower_lag.h"
#include "replication/group_state_log.h"
#include "replication/leader_connection.h"
#include "replication/leadership.h"
#include "replication/term_history.h"

namespace tokimq::broker {

struct ReplicationOptions {
  int broker_id = 0;            // 0: leader of term 0 by configuration
  std::string replicate_from;   // host:port of the leader; required when broker_id != 0
  bool sync = false;            // replication = "sync"
  int64_t ack_timeout_ms = 3000;  // sync: a send fails kUnavailable when no follower acked by then
  uint32_t pull_bytes = 1u << 20;  // chunk size a follower asks for
  int64_t idle_pull_interval_ms = 1;  // a follower's pause after an empty chunk
  uint64_t segment_size = 0;         // this broker's CommitLog segment size (must match)
  // Cluster mode (issue 20 item 4): the etcd election sets the role. The broker starts as a
  // follower with no leader (serving nothing) until it is elected or told whom to follow;
  // broker_id and replicate_from then do not decide the role.
  bool elected = false;
  // A deposed leader's restart (BrokerOptions::replication_deposed): starts as a follower of
  // replicate_from (none: until told whom to follow) whatever broker_id and history say.
  bool deposed = false;
  // BrokerOptions::on_restart: called at most once, when this replica served as leader and is
  // deposed, or when its log diverged from its leader's. nullptr: no restart.
  std::function<void(const std::string& leader, const std::string& reason)> on_restart;
  // Term history (replication/term_history.h): as loaded, and cut, by RejoinBeforeOpen; kept
  // in `history_path` (empty: not persisted, tests) through `fs`.
  replication::TermHistory history;
  std::string history_path;
  FileSystem* fs = nullptr;
  // The follower's connection to its leader: credentials (replication_access_key /
  // _secret_key) and TLS (replication_tls, _ca, _server_name).
  LeaderConnectionOptions leader_connection;
  // Consumer-group state replication (docs/replication.md "Consumer-group state"): the broker's
  // metadata RocksDB, whose "group/" keys the group-state records carry (GroupStateLog). nullptr
  // (a single-node broker): no records are written or replayed.
  rocksdb::DB* group_state_db = nullptr;
  Clock* clock = nullptr;  // born time of group-state records; nullptr: SystemClock
};

class ReplicationService {
 public:
  // start_serving starts the services a leader runs (called once: at Start for a leader, with
  // promoted = false; at promotion for a replica that followed, with promoted = true: its logs
  // were written by another leader). It must not call back into this object.
  ReplicationService(ReplicationOptions options, MessageStore* store,
                     std::function<absl::Status(bool promoted)> start_serving);
  ~ReplicationService();

  absl::Status Start();
  void Stop();

  // OK when this broker leads its group; else kFailedPrecondition naming the leader (clients
  // retry there; the cluster routes of issue 19 point at it). With a lease check installed
  // (cluster mode), also kFailedPrecondition once the leader's election lease may have expired.
  // Also kFailedPrecondition while a promotion is starting the leader's services (the consumer
  // state is reloaded then: nothing may use it before).
  absl::Status CheckWritable() const;
  // Whether this broker leads its group now (and, in cluster mode, its lease still fences it
  // in), whether or not its services are started yet.
  bool Leads() const;
  // Cluster mode: `valid` tells whether this leader's etcd lease still fences it in
  // (cluster::LeaderElection::LeaseValidNow). Set once before requests arrive.
  void SetLeaseCheck(std::function<bool()> valid) { lease_valid_ = std::move(valid); }
  bool sync() const { return options_.sync; }

  // The end of a sync send: done(OK) once a follower holds every byte below `end`, error per
  // AckTracker::WhenReplicated. Async: done(OK) at once.
  void WhenReplicated(PhysicalOffset end, replication::AckTracker::Done done);

  absl::Status HandlePull(const proto::ReplicatePullRequest& req,
                          proto::ReplicatePullResponse* resp);
  absl::Status HandleRole(const proto::ReplicationRoleRequest& req,
                          proto::ReplicationRoleResponse* resp);

  // This replica's view of its group (role, term, CommitLog end) and, on a leader, each
  // follower's lag (replication/follower_lag.h). broker_name is left to the caller.
  void GroupStatus(proto::GroupStatusResponse* resp) const;

  // Whether this replica's consumer-group state is marked stale (GroupStateLog::stale: a
  // rejoin cut moved its replay position back; cleared by the next snapshot replayed). Such a
  // replica refuses a replication_role promote without `force` and ranks after fresh peers in
  // the election (docs/replication.md "A stale replica does not lead"). false without a
  // group-state log.
  bool GroupStateStale() const;

  // Consumer-group state (docs/replication.md "Consumer-group state"); nullptr when
  // options.group_state_db is not set.
  GroupStateLog* group_state_log() { return group_state_log_.get(); }
  // The ConsumerService's write hook (ConsumerServiceImpl::SetStateWriteLog): appends `batch`
  // as a group-state record while this broker leads (Leads); kFailedPrecondition otherwise
  // (a deposed leader changes no consumer state). OK without a group-state log.
  absl::Status LogStateWrite(const rocksdb::WriteBatch& batch);
  // The dispatch of a group-state record: a follower replays it (GroupStateLog::CatchUp; an
  // error is logged and retried at the next dispatch and at promotion).
  void OnGroupStateDispatch();
  // replication = "sync" with a group-state log: blocks until a follower holds every CommitLog
  // byte written so far (the group-state records of the request just handled among them), as
  // a sync send waits. OK at once otherwise. Errors: kUnavailable (no follower within
  // ack_timeout_ms, or this broker lost its term): the change stands on this broker but is
  // not acknowledged (a receive's leases expire; a retried ack finds its handle stale).
  // Inside a DeferStateWaits scope on the calling thread it does not block: see there.
  absl::Status AwaitStateReplicated();
  // While one lives on a thread, AwaitStateReplicated on that thread does not block: when it
  // would have waited it records in *end the CommitLog end a follower must hold (the largest
  // of its calls in the scope; *end is left alone otherwise) and returns OK. The holder then
  // answers the request through WhenReplicated(*end, ...) — from the ack tracker, no thread
  // waiting — and replaces the OK answer with the error it gets (kUnavailable: no follower
  // within ack_timeout_ms, or this broker lost its term; the change stands on this broker, as
  // for a blocking wait). Used by the native server (Connection::Dispatch) for receive, ack,
  // change-invisible-duration, nack and update-offset; the gRPC endpoint does not use it (its
  // handlers block, docs/replication.md "Ack modes"). Scopes nest (the inner one collects);
  // the object stays on the thread that made it.
  class DeferStateWaits {
   public:
    explicit DeferStateWaits(PhysicalOffset* end);
    ~DeferStateWaits();
    DeferStateWaits(const DeferStateWaits&) = delete;
    DeferStateWaits& operator=(const DeferStateWaits&) = delete;

   private:
    PhysicalOffset* previous_;
  };
  // replication = "sync": blocks until a follower holds every CommitLog byte written so far
  // (a recall's delete marker among them), up to ack_timeout_ms. OK at once in async mode.
  // Errors: kUnavailable (no follower in time, or this broker lost its term); what was written
  // stands on this broker but is not acknowledged.
  absl::Status AwaitReplicated();
  // Whether AwaitStateReplicated waits (sync with a group-state log): the native server then
  // handles receive, ack, renew and nack under DeferStateWaits (on its I/O thread, as in async
  // mode) and answers them from the ack tracker.
  bool WaitsForGroupState() const { return group_state_log_ != nullptr && options_.sync; }

  // Follower: the last failed pull's or connection's error ("" after a pull succeeded), for
  // replication_role / group_status (pull_error).
  std::string pull_error() const;

  replication::Leadership* leadership() { return &leadership_; }
  int64_t max_offset() const;  // this replica's CommitLog end, bytes
  const ReplicationOptions& options() const { return options_; }

 private:
  void OnViewChange(const replication::LeadershipView& view);
  // Leader: a new term starts at the CommitLog end (history entry, persisted).
  void BeginTerm(int64_t term);
  // Follower, before the first pull from a leader (and after its term changed): fetches its
  // term history and checks that this log agrees with it (TermHistory::ConsistentEnd); then
  // takes the leader's history. false when the check could not run or found this log diverged
  // (then diverged_ is set: no pulls until a restart truncates, see RejoinBeforeOpen).
  bool CheckHistory();
  void PullLoop();
  // One pull from `leader`; returns false when the follower should pause before the next.
  bool PullOnce(const std::string& leader);
  void ExpiryLoop();
  void SetPullError(const absl::Status& s);  // OK clears it
  // Waits up to ms (real time) or until Stop.
  void Pause(int64_t ms);
  // Logs and calls options_.on_restart once (docs/replication.md "Deposed leaders"); false
  // when there is no handler.
  bool RequestRestart(const std::string& leader, const std::string& reason);

  ReplicationOptions options_;
  MessageStore* store_;
  std::function<absl::Status(bool promoted)> start_serving_;
  std::function<bool()> lease_valid_;  // set before requests; read-only afterwards
  replication::Leadership leadership_;
  replication::AckTracker acks_;
  replication::FollowerLag lag_;
  std::unique_ptr<GroupStateLog> group_state_log_;

  // Held around a follower's append of a chunk and a leader's history entry, so the entry's
  // start is never in the middle of a replicated append.
  std::mutex append_mu_;
  replication::TermHistory history_;  // guarded by append_mu_
  std::atomic<bool> diverged_{false};
  std::atomic<bool> restart_requested_{false};
  mutable std::mutex pull_error_mu_;
  std::string pull_error_;  // guarded by pull_error_mu_

  std::mutex serving_mu_;
  bool serving_ = false;   // guarded by serving_mu_
  std::atomic<bool> ready_{false};  // start_serving_ returned (CheckWritable)
  bool followed_ = false;  // this replica was a follower at some point; guarded by serving_mu_

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by stop_mu_
  std::thread puller_;
  std::thread expirer_;
  struct PullState;
  std::unique_ptr<PullState> pull_;  // puller thread only
};

}  // namespace tokimq::broker
