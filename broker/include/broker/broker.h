// Broker: the request handlers of tokimq-broker and the stores behind them.
//
// Owns, in opening order: the metadata RocksDB (<data_dir>/meta, shared with the
// ConsumerService), the MessageStore (<data_dir>/store), the TimerStore (<data_dir>/timer), the
// MetadataStore and the ConsumerService; the MessageStore dispatch listener is fanned out to the
// ConsumerService; a RetentionTask deletes expired CommitLog segments in the background
// (retention_interval_ms). Handle() turns one protocol request into its response; the network
// Server (server.h) calls it from worker threads, never from I/O threads, because Send (sync
// flush) and Receive (long poll) block.
//
// Time: options.clock when given (tests), else a SystemClock, or with options.manual_clock a
// ManualClock that only the admin AdvanceClock request moves (refused otherwise). The manual
// time is persisted so it never goes backwards across a restart. Files: options.fs and
// options.meta_env (BrokerOptions), passed to every store the Broker opens.
//
// Thread-safety: Handle may be called concurrently from any number of threads. Close() once,
// after the server stopped calling Handle.
// Durability: Close() stops retention and the services, checkpoints the TimerStore, closes the
// MessageStore (which writes the clean-shutdown marker) and the RocksDB. On a full disk the
// checkpoints and the marker may not fit: Close() logs that and still succeeds (everything
// acknowledged is in the fsynced CommitLog; the next start recovers as after a crash).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "broker/consumer_service.h"
#include "broker/group_config_store.h"
#include "broker/metadata_store.h"
#include "commitlog/commit_log.h"
#include "proto/tokimq.pb.h"

namespace rocksdb {
class DB;
class Env;
}

namespace tokimq {
class Clock;
class FileSystem;
class ManualClock;
class MessageStore;
class TimerStore;
}  // namespace tokimq

namespace tokimq::broker {
namespace auth {
class AuthStore;
}

class CheckMailbox;
class DiskWatermark;
class RetentionTask;
class ReplicationService;
class TopicSendCounters;
class TransactionService;
struct PreparedSend;

// Latest time the manual clock can be advanced to: 9999-12-31T23:59:59.999Z in ms since the
// epoch (AdvanceClock refuses to go past it with kInvalidArgument).
inline constexpr int64_t kMaxManualClockMs = 253'402'300'799'999;

struct BrokerOptions {
  std::string data_dir = "./data";
  // Environment (RocksDB / leveldb style: injected so that a test can run a whole broker on a
  // fault-injecting file system and a manual clock). None is owned; each must outlive the
  // Broker. nullptr: the real one.
  //   fs: every file of the stores (CommitLog, ConsumeQueues, TimerLog, wheel, checkpoints) and
  //       the disk watermark's free-space checks. Default FileSystem::Default().
  //   clock: the message timeline (deliver times, leases, retention), the disk watermark's
  //       refresh interval and the group-state WAL syncer's interval (kWalSyncIntervalMs,
  //       which otherwise runs in real time). Default SystemClock::Default(). Not together with
  //       manual_clock (kInvalidArgument).
  //   meta_env: the RocksDB Env of the metadata and group-state database (<data_dir>/meta),
  //       e.g. rocksdb::NewCompositeEnv over broker/rocksdb_fault_injection_fs.h. Default
  //       rocksdb::Env::Default().
  FileSystem* fs = nullptr;
  Clock* clock = nullptr;
  rocksdb::Env* meta_env = nullptr;
  bool manual_clock = false;
  int64_t manual_clock_start_ms = 0;  // 0: the system time at first start
  FlushMode flush_mode = FlushMode::kAsync;
  int64_t async_flush_interval_ms = 200;
  // Replication inside a broker group (issue 20, docs/replication.md): broker id 0 leads term 0
  // by configuration; any other id follows replicate_from (host:port of the leader) until an
  // admin ReplicationRole request (later the etcd election) promotes it. replication_sync:
  // sends are answered only once a follower holds them (replication = "sync"; else "async").
  int broker_id = 0;
  std::string replicate_from;
  bool replication_sync = false;
  // The replication mode was given explicitly (--replication, TOML `replication`): the broker
  // is a member of a broker group and logs its consumer-group state into the CommitLog even as
  // a lone broker id 0 in async mode (docs/replication.md "Consumer-group state"). Unset (the
  // default): a broker id 0 without --replicate-from in async mode is a single node.
  bool replication_explicit = false;
  int64_t replication_ack_timeout_ms = 3000;
  // Cluster mode (main sets it with --cluster): the etcd election decides the role; the broker
  // serves nothing until elected or told whom to follow (docs/cluster.md "Broker groups").
  bool replication_elected = false;
  // A deposed leader's restart (docs/replication.md "Deposed leaders"; tokimq-broker --deposed):
  // start as a follower whatever the broker id and the term history say (a broker id 0 never
  // leads term 0 again); the follower path then rejoins, replays and, on a later promotion,
  // adopts the log as any follower does.
  bool replication_deposed = false;
  // host:port of the leader whose term history the CommitLog is checked against (and cut to)
  // before the stores open, when replicate_from is empty (cluster mode, where the election
  // names the leader to follow; --rejoin-from). Static mode uses replicate_from.
  std::string rejoin_from;
  // Called (at most once per Broker, from a replication thread) when this broker must restart
  // to serve correctly: it served as leader and was deposed (its services hold stale
  // in-memory state), or its CommitLog diverged from its leader's (only a restart cuts it).
  // `leader` is the leader to follow / rejoin ("" when unknown); `reason` is for the log. The
  // handler must return at once and arrange Close() and a fresh Open (tokimq-broker re-executes
  // itself with --deposed). nullptr: nothing restarts (a deposed leader refuses writes, a
  // diverged follower stops pulling).
  std::function<void(const std::string& leader, const std::string& reason)> on_restart;
  // Credentials a follower authenticates its pulls with (docs/replication.md "Access"): with
  // auth on, the leader answers replicate_pull only for a user with the cluster admin ACL
  // (in a cluster users are in etcd, docs/security.md "Clusters"; replicas started without
  // --cluster need it on every member). Empty: unauthenticated pulls.
  std::string replication_access_key;
  std::string replication_secret_key;
  // TLS of a follower's connections to its leader (pulls and the rejoin check; docs/
  // replication.md "TLS between members"). Unset: ResolveTls makes it true when this broker's
  // own tls_mode is enforcing (a group shares one TLS policy), else false; the Broker reads an
  // unset value as false. The CA file (PEM; empty: the system's CAs) the leader's certificate
  // must chain to, and the name it must hold (empty: the host of the leader's address).
  std::optional<bool> replication_tls;
  std::string replication_tls_ca_file;
  std::string replication_tls_server_name;
  uint64_t commitlog_segment_size = uint64_t{1} << 30;
  uint32_t max_message_size = 4u << 20;         // bytes of body
  // The wire frame limit (ServerOptions::max_frame_bytes; main copies it here): a receive never
  // answers with one message whose answer would exceed it (ReceiveRequest::max_message_bytes).
  uint32_t max_frame_bytes = 16u << 20;
  int64_t timer_precision_ms = 1000;
  int64_t timer_window_ms = 7LL * 24 * 3600 * 1000;
  // TimerStoreOptions::service_nice: the timer's enqueue/dequeue threads run at this nice value
  // (-20..19). -10 by default: when request handling saturates the CPUs (a send burst), the
  // releases of due messages come first. 2-core benchmark machine, 1M messages due 1-10 s after
  // a ~330k msg/s send burst, release lateness p99 (two runs each): nice 0 103/175 ms, -5 17/26
  // ms, -10 8/13 ms, enqueue rate unchanged within noise (docs/performance.md). Needs
  // CAP_SYS_NICE or RLIMIT_NICE; without it a warning is logged and the threads run at the
  // process's priority.
  int timer_thread_nice = -10;
  // TimerStoreOptions::service_realtime_priority: SCHED_FIFO priority of the timer's dequeue
  // read and put threads within a CPU budget of 20 ms per 100 ms (0: off; 1-99). 1 by default:
  // messages are released at their millisecond when other processes load the CPUs (workload g,
  // docs/performance.md: release p99 2-6 ms at nice -10 alone on the loaded 2-core machine).
  // Needs CAP_SYS_NICE or RLIMIT_RTPRIO; without it a warning is logged and the threads run as
  // ordinary threads at timer_thread_nice.
  int timer_realtime_priority = 1;
  // Retention age of topics created without one. The CommitLog is shared, so the age applied
  // is the largest of this and every topic's retention (docs/operations.md "Retention").
  int64_t default_retention_ms = 3LL * 24 * 3600 * 1000;
  int64_t retention_interval_ms = 60'000;       // how often retention runs; 0 = never
  int64_t max_long_poll_ms = 20'000;            // longer long polls are cut to this
  // Disk watermarks (broker/src/disk_watermark.h, docs/operations.md "Disk full"): producer
  // sends are refused with kResourceExhausted while the data dir's file system has fewer than
  // max(disk_min_free_bytes, total * (1 - disk_max_used_ratio)) bytes free; the rest stays for
  // the broker's own writes. 0 / >= 1 turns a term off. Checked from a cached statvfs,
  // refreshed every disk_check_interval_ms or after disk_check_bytes of CommitLog growth.
  uint64_t disk_min_free_bytes = 0;
  double disk_max_used_ratio = 0.90;  // RocketMQ's diskSpaceWarningLevelRatio default
  int64_t disk_check_interval_ms = 1000;
  uint64_t disk_check_bytes = 64u << 20;
  // ConsumeQueue files kept open at most (MessageStoreOptions::max_open_files). 0: sized from
  // the RLIMIT_NOFILE soft limit (broker/fd_budget.h, docs/operations.md "File descriptors").
  size_t max_open_files = 0;
  std::map<std::string, GroupPolicy> group_policies;
  // Transactions (docs/transactions.md; RocketMQ's transactionTimeOut, transactionCheckInterval,
  // transactionCheckMax).
  int64_t transaction_immunity_ms = 6'000;
  int64_t transaction_check_interval_ms = 30'000;
  int transaction_max_checks = 15;
  // Authentication and authorization on both endpoints (docs/security.md). Off by default: every
  // connection may do everything, as before.
  bool auth = false;
  // "AK:SK": created as a super user at start when the broker has no user yet (the bootstrap).
  std::string auth_init_user;
};

// Hands a transaction check to a producer reached by another endpoint (the RocketMQ gRPC
// endpoint's Telemetry streams); true when one was live for check.topic().
using ExternalCheckSink = std::function<bool(const proto::TransactionCheck& check)>;

class Broker {
 public:
  static absl::StatusOr<std::unique_ptr<Broker>> Open(BrokerOptions options);
  ~Broker();

  // Fills `resp` (id, status, body) for `req`. Never throws; every failure is a status in the
  // response. The handshake is answered by the server, but Handle accepts it too.
  void Handle(const proto::Request& req, proto::Response* resp);
  // Handle without blocking the calling thread on an fsync: a Send under flush = "sync" is
  // appended here and answered once the CommitLog's group commit has fsynced it (docs/protocol.md
  // "Durable sends"): `done` runs then, on the CommitLog's sync thread, with *resp filled (the
  // results, or the fsync's error; nothing is answered OK before its fsync returned). Any other
  // request, any send in flush = "async", and every error found before the append: Handle, then
  // done() on the caller. `resp` must stay valid until `done` runs; `done` must be short (it
  // hands the response to another thread). Thread-safe.
  void HandleNoWait(const proto::Request& req, proto::Response* resp,
                    absl::AnyInvocable<void() &&> done);
  // True when HandleNoWait answers sends from the group commit (flush = "sync"): a send then
  // never waits for an fsync on the calling thread (it may still wait for the store's locks,
  // and rarely for a file creation: a new CommitLog segment or ConsumeQueue file).
  bool SendsAnsweredByGroupCommit() const {
    return options_.flush_mode == FlushMode::kSync || options_.replication_sync;
  }

  // Native-protocol fast path for a Receive request that asks for encoded properties (what
  // the C++ client sends): the whole response frame, each message written once from its stored
  // record (broker/src/receive_encoder.h) instead of through a proto::Response and its
  // serialization — the same bytes Handle() + wire::EncodeFrame would give (tested byte for
  // byte). `messages` counts the messages in it (0 when none was ready). On an error, `status`
  // says what Handle would have put in the response and `frame` is empty. std::nullopt for any
  // other request (use Handle). Thread-safe.
  struct EncodedResponse {
    absl::Status status;
    std::string frame;
    int messages = 0;
  };
  // `ack_results`: the results of the acks this receive carried, already applied by
  // TakeReceiveAcks (written into the frame as ReceiveResponse.ack_results); nullptr when it
  // carried none. std::nullopt also for a receive whose acks were not taken.
  std::optional<EncodedResponse> HandleReceiveFrame(
      const proto::Request& req, const std::vector<absl::Status>* ack_results = nullptr);

  // The acks a receive carries (ReceiveRequest.ack_receipt_handles, docs/protocol.md "Acks
  // carried by a receive"): checks that this broker takes writes and that the receive itself
  // is valid (the errors Handle would answer for it: then nothing is acked), applies them as
  // one AckRequest would (one AckBatch; sync replication: waits as HandleAck does, deferred
  // inside a ReplicationService::DeferStateWaits scope), and clears them from *req so that the
  // receive that follows — at once, or after its long poll on another thread — does not apply
  // them again. One result per handle, in order. kInvalidArgument: more than kMaxReceiveBatch
  // handles. Thread-safe.
  absl::StatusOr<std::vector<absl::Status>> TakeReceiveAcks(proto::ReceiveRequest* req);

  // First step of a shutdown, before the servers stop (they wait for running requests): ends
  // every waiting long poll now — it answers with what it has, usually nothing — and makes
  // later receives return without waiting; stops the consumer service's expiry and sync
  // threads (Close() then syncs again). Without it a SIGTERM waited for open long polls, up to
  // max_long_poll (20 s). Thread-safe; idempotent.
  void StopLongPolls();

  // Stops the services and closes the stores (see class comment). Idempotent.
  absl::Status Close();

  // The retention age applied to the shared CommitLog now: the largest of the default retention
  // and every existing topic's retention, in ms.
  int64_t EffectiveRetentionMs() const;

  // Check-backs of half messages go to native pollers first, then to `sink` (set once, before
  // clients connect; cleared with nullptr before the sink's owner goes away). Thread-safe.
  void SetExternalCheckSink(ExternalCheckSink sink);

  // Cluster mode (broker/cluster_node.h): a hook that sees every request Handle gets first and
  // answers it when it returns true (topic admin through etcd, routes, cluster status); false
  // hands the request on to the broker's own handlers. It runs on the calling thread and must
  // be thread-safe. Set once, before the server starts; nullptr: none (single node).
  using RequestInterceptor = std::function<bool(const proto::Request&, proto::Response*)>;
  void SetRequestInterceptor(RequestInterceptor interceptor) {
    interceptor_ = std::move(interceptor);
  }
  // The broker's topic metadata (cluster mode applies the cluster's topics to it).
  MetadataStore* metadata() const { return metadata_.get(); }
  // The broker group side (broker/src/replication/replication_service.h); the cluster node's
  // election drives its Leadership. Valid between Open and Close.
  ReplicationService* replication() const { return replication_.get(); }
  GroupConfigStore* group_configs() const { return group_configs_.get(); }
  const BrokerOptions& options() const { return options_; }

  Clock* clock() const { return clock_; }
  bool manual_clock() const { return manual_clock_ != nullptr; }
  // Users and ACL rules (always open; consulted by the endpoints only when auth_enabled()).
  auth::AuthStore* auth_store() const { return auth_.get(); }
  bool auth_enabled() const { return options_.auth; }
  // The stores, for the web console's reads (DLQ browser, message lookup, the timer's due
  // counts; broker/src/console/). Owned by the Broker, set from Open to Close. Thread-safe as
  // their own classes say.
  const MessageStore* message_store() const { return store_.get(); }
  const TimerStore* timer_store() const { return timers_.get(); }

 private:
  explicit Broker(BrokerOptions options);
  absl::Status OpenStores();
  // OpenStores' steps, in order: the metadata RocksDB (<data_dir>/meta); the clock (persisted
  // manual time); the MessageStore and the disk watermark; the TimerStore; the subscriptions
  // and the ConsumerService (wired to the MessageStore's dispatch listener).
  absl::Status OpenMetadataDb();
  absl::Status SetUpClock();
  absl::Status OpenMessageStore();
  absl::Status OpenTimerStore();
  absl::Status OpenConsumerService();
  // Starts the services that write to the CommitLog on their own (timers, consumers,
  // transactions, retention): at open on a leader, at promotion on a follower (`promoted`:
  // the timer store first adopts the moves the old leader made, TimerStore::AdoptReplicatedLog).
  // A follower's timer store follows until then (StartTimerFollowing); the two are serialised
  // by timer_mode_mu_, and following never starts once the leader's services did.
  absl::Status StartServing(bool promoted);
  // After the replication service started: a broker that does not lead yet runs its timer
  // store in follower mode (TimerStore::StartFollowing; docs/replication.md "The follower's
  // timer store"). No-op when StartServing ran already.
  absl::Status StartTimerFollowing();  // timer_follow.cc
  // StartServing's promotion step, timer_mode_mu_ held: ends the follower mode (Stop
  // checkpoints) and adopts the replicated log (only the follower's lag); logs the time taken.
  absl::Status PromoteTimerStore();  // timer_follow.cc

  // Handle's switch: the handler of req's kind; its status goes in the response.
  absl::Status Dispatch(const proto::Request& req, proto::Response* resp);
  // One handler per request; each returns the status put in the response.
  absl::Status HandleHandshake(const proto::HandshakeRequest& req, proto::Response* resp);
  absl::Status HandleListTopics(proto::Response* resp);
  absl::Status HandleCreateTopic(const proto::CreateTopicRequest& req, proto::Response* resp);
  absl::Status HandleUpdateTopic(const proto::UpdateTopicRequest& req, proto::Response* resp);
  absl::Status HandleDescribeTopic(const std::string& name, proto::Response* resp);
  // Stores the send's messages and fills *resp. wait_durable: returns once they are durable per
  // the flush policy; else (kSync) *durable_end is the CommitLog end to wait for before the
  // answer may go out (PhysicalOffset(0): nothing to wait for).
  absl::Status HandleSend(const proto::SendRequest& req, proto::SendResponse* resp,
                          bool wait_durable = true, PhysicalOffset* durable_end = nullptr);
  // The send of Handle (the gRPC SendMessage, and native sends not answered from the group
  // commit): HandleSend, then with replication = "sync" blocks the calling thread until a
  // follower acknowledged the send's records (ReplicationService::WhenReplicated), so both APIs
  // answer OK only for what two replicas hold. Errors: HandleSend's, or kUnavailable (no
  // follower within replication_ack_timeout, or this broker lost its term) with *resp cleared.
  absl::Status HandleSendReplicated(const proto::SendRequest& req, proto::SendResponse* resp);
  // Validates every entry of `req` (send_validation.h) and builds the messages to store, at
  // time `now` (ms): all or nothing; an error names the entry ("message i: ...") in a batch.
  absl::Status PrepareSend(const proto::SendRequest& req, int64_t now,
                           std::vector<PreparedSend>* prepared);
  // Recalls a scheduled message; a request naming its topic must name the message's
  // (broker/src/recall_handler.cc). Errors as TimerStore::Recall; kNotFound for another topic.
  absl::Status HandleRecall(const proto::RecallRequest& req);
  absl::Status HandleReceive(const proto::ReceiveRequest& req, proto::ReceiveResponse* resp);
  // Validates a receive request and takes its messages (raw records, leased).
  absl::StatusOr<std::vector<ReceivedMessage>> ReceiveFor(const proto::ReceiveRequest& req);
  // ReceiveFor's checks of the request (group, topic, sizes, durations, filters); the parsed
  // SQL92 filter (null: none).
  absl::StatusOr<std::shared_ptr<const consumer::SqlFilter>> ValidateReceive(
      const proto::ReceiveRequest& req);
  // TakeReceiveAcks without clearing: validates and applies req's ack_receipt_handles.
  absl::StatusOr<std::vector<absl::Status>> ApplyReceiveAcks(const proto::ReceiveRequest& req);
  absl::Status HandleAck(const proto::AckRequest& req, proto::AckResponse* resp);
  // The acks of an AckRequest or of a receive that carries them: one AckBatch of `group`, then
  // (replication = "sync", some OK) the wait for a follower. One result per handle.
  absl::StatusOr<std::vector<absl::Status>> AckHandles(
      const std::string& group, const google::protobuf::RepeatedPtrField<std::string>& handles);
  absl::Status HandleChangeInvisibleDuration(const proto::ChangeInvisibleDurationRequest& req,
                                             proto::Response* resp);
  absl::Status HandleNack(const proto::NackRequest& req);
  // Stats in steps, each filling its part of *resp: topics and queues (paged by req), the timer
  // store's gauges and lateness histogram, consumer groups (paged by req), and storage
  // (CommitLog offsets and syncs, disk watermark, retention).
  // Offset-based consumption (pull_handler.cc; docs/protocol.md "Offset-based consumption").
  absl::Status HandlePull(const proto::PullRequest& req, proto::PullResponse* resp);
  absl::Status HandleGetOffset(const proto::GetOffsetRequest& req, proto::OffsetResponse* resp);
  absl::Status HandleUpdateOffset(const proto::UpdateOffsetRequest& req);
  absl::Status HandleQueryOffset(const proto::QueryOffsetRequest& req, proto::OffsetResponse* resp);
  // OK when `topic` resolves (ResolveTopic's errors) and has queue `queue_id` (else
  // kInvalidArgument).
  absl::Status CheckQueue(const std::string& topic, int32_t queue_id) const;
  absl::Status HandleStats(const proto::StatsRequest& req, proto::StatsResponse* resp);
  void FillTopicStats(const proto::StatsRequest& req, proto::StatsResponse* resp) const;
  void FillTimerStats(proto::TimerStats* timer) const;
  void FillGroupStats(const proto::StatsRequest& req, proto::StatsResponse* resp);
  void FillStorageStats(proto::StatsResponse* resp) const;
  absl::Status HandleAdvanceClock(const proto::AdvanceClockRequest& req, proto::Response* resp);
  // Transactions (broker/src/transaction/transaction_handlers.cc).
  absl::Status OpenTransactions();
  absl::Status HandleEndTransaction(const proto::EndTransactionRequest& req);
  absl::Status HandlePollTransactionChecks(const proto::PollTransactionChecksRequest& req,
                                           proto::TransactionChecksResponse* resp);
  void FillTransactionStats(proto::TransactionStats* out) const;
  // The figures /metrics needs beyond the store's (stats_counters.cc): per-topic sends,
  // per-group acks, expiries, backlog and oldest un-acked age, the version and start time.
  void FillCounterStats(const proto::StatsRequest& req, proto::StatsResponse* resp) const;
  // Adds the stored results of a send to the per-topic counters.
  void CountSent(const proto::SendResponse& resp);
  // Stores the transactional entries of `prepared` (moved out) as halves, filling their results.
  absl::Status StoreHalves(std::vector<PreparedSend>* prepared, const std::vector<int>& index,
                           int64_t now, proto::SendResponse* resp);
  // Consumer group configuration: create / update / describe (group_handlers.cc).
  absl::Status HandleGroupAdmin(const proto::Request& req, proto::Response* resp);
  // User and ACL administration (auth_handlers.cc).
  absl::Status HandleAuthAdmin(const proto::Request& req, proto::Response* resp);
  // Opens the AuthStore and applies options_.auth_init_user.
  absl::Status OpenAuth();

  // Topic as seen by Send/Receive: user topics from metadata; "%DLQ%" / "%RETRY%" system topics
  // and the poison topic (receive only) with one queue. kInvalidArgument for a name the name
  // rule refuses (common/names.h) or another system topic; kNotFound for an unknown topic.
  absl::StatusOr<TopicConfig> ResolveTopic(const std::string& name) const;
  int32_t SelectQueue(const TopicConfig& topic, const std::string& key);
  std::string NextMessageId();
  void RememberSubscription(const std::string& group, const std::string& topic);

  BrokerOptions options_;
  RequestInterceptor interceptor_;
  std::unique_ptr<ManualClock> manual_clock_;
  Clock* clock_ = nullptr;
  FileSystem* fs_ = nullptr;  // options_.fs or FileSystem::Default()
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<MessageStore> store_;
  std::unique_ptr<TimerStore> timers_;
  std::mutex timer_mode_mu_;     // StartServing / StartTimerFollowing
  bool serving_started_ = false;  // guarded by timer_mode_mu_
  std::unique_ptr<MetadataStore> metadata_;
  std::unique_ptr<GroupConfigStore> group_configs_;
  std::unique_ptr<auth::AuthStore> auth_;
  std::unique_ptr<ConsumerService> consumers_;
  std::unique_ptr<RetentionTask> retention_;
  std::unique_ptr<ReplicationService> replication_;
  std::unique_ptr<DiskWatermark> watermark_;
  std::unique_ptr<TransactionService> transactions_;
  std::unique_ptr<CheckMailbox> check_mailbox_;
  std::unique_ptr<TopicSendCounters> sent_;
  int64_t started_ms_ = 0;  // clock_ when the stores were open
  std::mutex check_sink_mu_;
  ExternalCheckSink external_check_sink_;  // check_sink_mu_
  bool closed_ = false;
  std::mutex close_mu_;

  std::atomic<uint64_t> id_counter_{0};
  uint32_t id_salt_ = 0;
  std::mutex rr_mu_;
  std::unordered_map<std::string, uint32_t> round_robin_;
  std::mutex subs_mu_;
  std::map<std::string, std::set<std::string>> subscriptions_;  // group -> topics
};

}  // namespace tokimq::broker
