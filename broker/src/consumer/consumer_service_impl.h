// ConsumerServiceImpl: the RocksDB + TimerStore backed ConsumerService (see
// broker/consumer_service.h for the contract, docs/formats/group-state.md for what is stored and
// docs/operations.md "Delivery guarantees" for when duplicates happen). It orchestrates the
// units that each hold one concept:
//   queue_progress.h       one group's state in one queue (consume offset, leases)
//   fifo_group_index.h     FIFO queues: which message groups block, which parked entries are due
//   lease_expiry_index.h   lease deadlines that drive expiry
//   retry_copy.h           the retry / dead-letter copy that ends a lease without an ack
//   receipt_handle.h       the receipt handle codec
//   backoff_policy.h       the redelivery delay after an expiry or a nack
//   tag_filter.h           which messages a tag filter takes
//   group_state.h          the group-state record codecs (RocksDB keys and values)
// and, as members in files of their own: Receive (receive.cc, receive_scan.cc), lease expiry
// (lease_expiry.cc), consumer-state recovery on open (consumer_state_recovery.cc), the
// figures for Stats and /metrics (group_metrics.cc).
//
// Locking (what each lock guards; where two are held at once, the upper one is taken first):
//   lease_mu_       serialises expiry processing (RunDueExpiries, the index's compaction).
//   Progress::mu    one queue's Progress (consume offset, leases, FIFO index), held while
//                   handing out, acking, renewing or expiring its leases, including the RocksDB
//                   write that records the change, so the order of writes for one queue is the
//                   order of the in-memory changes. A Receive locks every Progress it may read
//                   from (the retry view and the topic's queues) in address order for the whole
//                   call; AckBatch does the same with the ones its handles name; everything
//                   else holds at most one. (A Receive first try-locks and skips busy queues; it
//                   waits only if that found nothing.)
//   map_mu_         the maps progress_ and groups_ (entries never erased, so pointers stay
//                   valid) and each GroupState::policy; taken alone or under one Progress::mu.
//   Long-poll wake-ups take no lock (wake_, long_poll_wake.h): OnDispatch runs on the putting
//                   thread (the timer's realtime put among others), which must neither wait for
//                   a preempted request thread nor deadlock with a Receive that is itself
//                   putting (a TTL move to the DLQ).
//   sync_mu_        sync_cv_ only (the WAL syncer's sleep).
//   expiries_ and copies_ lock themselves and are never held while taking another lock.
//   Atomics (no lock): GroupState::in_flight and next_queue, waiters_, stopping_, wal_dirty_.
//   secret_ is written by Recover (open, ReloadState) before any other call.
//
// Durability: group-state writes (leases with their progress, acks, renewals, nacks, expiries)
// go to the RocksDB WAL without fsync: they survive a process crash (kill -9) as soon as Write
// returns; a background thread (Start()) syncs the WAL every kWalSyncIntervalMs when anything
// was written, and Stop() syncs once more. A power loss or kernel crash can therefore undo the
// last ~kWalSyncIntervalMs of group-state changes, which at-least-once allows: an undone lease is
// a re-delivery, an undone ack a duplicate (docs/operations.md "Delivery guarantees"). Policy and
// handle secret are written synced. One Receive writes one WriteBatch for all queues it took
// from.
//
// Expiry: lease_expiry_index.h (one entry per queue per Receive and one per renewal or FIFO
// redelivery time; rebuilt from the persisted leases on open).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "broker/consumer_service.h"
#include "commitlog/message_store.h"
#include "common/clock.h"
#include "consumer/group_state.h"
#include "consumer/lease_expiry_index.h"
#include "consumer/long_poll_wake.h"
#include "consumer/queue_progress.h"
#include "consumer/receipt_handle.h"
#include "consumer/retry_copy.h"
#include "rocksdb/db.h"
#include "timerstore/timer_store.h"

namespace tokimq::consumer {

// Group-state WAL sync period of the background syncer.
inline constexpr int64_t kWalSyncIntervalMs = 50;

// Bytes a stored record can take in a receive answer at most: the record, its key and tag
// again as fields of their own, and the fixed fields (ReceiveRequest::max_message_bytes).
int64_t ReceiveAnswerBytes(const record::RecordView& v);

// Limits for request validation (and kMaxReceiveBatch, broker/consumer_service.h).
inline constexpr int64_t kMaxInvisibleMs = 12LL * 3600 * 1000;
inline constexpr int64_t kMaxLongPollMs = 5LL * 60 * 1000;
inline constexpr int64_t kMaxNackDelayMs = 7LL * 24 * 3600 * 1000;
// FIFO queues: messages parked behind blocked message groups, per queue, at most.
inline constexpr size_t kMaxFifoParked = 4096;

class ConsumerServiceImpl final : public ConsumerService {
 public:
  static absl::StatusOr<std::unique_ptr<ConsumerService>> Create(ConsumerServiceDeps deps);
  ~ConsumerServiceImpl() override;

  absl::StatusOr<std::vector<ReceivedMessage>> Receive(const ReceiveRequest& req) override;
  absl::Status Ack(const std::string& group, const std::string& receipt_handle) override;
  std::vector<absl::Status> AckBatch(
      const std::string& group, const std::vector<std::string_view>& receipt_handles) override;
  absl::StatusOr<std::string> ChangeInvisibleDuration(const std::string& group,
                                                      const std::string& receipt_handle,
                                                      int64_t invisible_ms) override;
  absl::Status Nack(const std::string& group, const std::string& receipt_handle,
                    std::optional<int64_t> delay_ms) override;
  void SetGroupPolicy(const std::string& group, GroupPolicy policy) override;
  int64_t InFlight(const std::string& group) const override;
  int64_t DlqDepth(const std::string& group) const override;
  int64_t Parked(const std::string& group) const override;
  GroupMetrics Metrics(const std::string& group) const override;  // group_metrics.cc
  void OnDispatch(const std::string& topic, int32_t queue_id, QueueOffset queue_offset) override;
  absl::Status RunUntilIdle() override;
  int64_t ExpiryIndexEntries() const override;
  absl::Status Start() override;
  absl::Status Stop() override;

  // Replication (docs/replication.md "Consumer-group state"). `log` is called with every
  // group-state batch (puts and deletes of "group/..." keys) before it is written to the
  // database, on the writing thread with the lock of the queue it changes held, so the batches
  // of one queue reach it in the order they are written; a non-OK status fails that write and
  // the request behind it (the broker's hook appends the batch to the replicated CommitLog and
  // refuses when this broker no longer leads). Set once, after Create and before Start (writes
  // of the open itself are not logged). Not set (single-node brokers): nothing is logged.
  void SetStateWriteLog(std::function<absl::Status(const rocksdb::WriteBatch&)> log) {
    log_state_write_ = std::move(log);
  }
  // Drops the in-memory state (consume offsets, leases, expiry entries, FIFO indexes, in-flight
  // counts) and loads it again from the database's group-state keys, as at open: a promoted
  // follower after it replayed its leader's records. Call before Start, while no other call
  // runs (the broker refuses consumer requests until promotion is done). Errors as at open.
  // consumer_state_recovery.cc.
  absl::Status ReloadState();

 private:
  // A message handed out by a Receive: decoded, or (ReceiveRequest::raw_records) its record.
  struct TakenMessage {
    int64_t queue_offset = 0;
    int64_t deliver_ms = 0;  // DELIVER_MS, else its store time
    Message message;
    std::string record;
  };
  // What ReceiveFrom found in one queue, applied to the Progress after the batch is written.
  struct Taken {
    Progress* p = nullptr;
    int64_t from = 0;  // first offset scanned
    int64_t next = 0;  // new consume offset
    std::vector<TakenMessage> messages;
    // Answer bytes (ReceiveAnswerBytes) this queue may still add (ReceiveRequest::max_bytes),
    // and whether its first message may exceed that (nothing taken yet by the whole Receive).
    int64_t byte_budget = INT64_MAX;
    bool oversize_first_ok = true;
    int64_t bytes = 0;  // answer bytes of `messages`
    // Whether a message of `size` answer bytes may be taken within the budget.
    bool Fits(int64_t size) const {
      return (messages.empty() && oversize_first_ok) || bytes + size <= byte_budget;
    }
    std::vector<LeaseRecord> leases;  // parallel to messages
    // FIFO only (else messages/leases are the new entries). New entries at/after `from`,
    // handed out or parked, in offset order; parked entries handed out again (new lease);
    // parked entries whose message is gone (retention) or that moved to the DLQ.
    std::vector<BlockLease> fresh;
    std::vector<BlockLease> replaced;
    std::vector<int64_t> dropped;
  };
  struct GroupState {
    GroupPolicy policy;
    std::atomic<int64_t> in_flight{0};
    std::atomic<int64_t> acked{0};          // since the broker started (GroupMetrics)
    std::atomic<int64_t> lease_expired{0};  // since the broker started (GroupMetrics)
    std::atomic<uint32_t> next_queue{0};  // round-robin start for Receive
  };

  // One AckBatch's handles: each one's result so far, its decoded receipt and the Progress it
  // names (nullptr: none); then, per Progress, the queue offsets whose leases end, and the
  // indexes of the handles that end them.
  struct AckBatchState {
    std::vector<absl::Status> out;
    std::vector<Receipt> receipts;
    std::vector<Progress*> owner;
    std::map<Progress*, std::vector<int64_t>> drops;
    std::vector<size_t> acked;
  };

  explicit ConsumerServiceImpl(ConsumerServiceDeps deps);
  // Consumer-state recovery on open (consumer_state_recovery.cc): LoadHandleSecret,
  // LoadGroupState, ReconcileWithStore, then IndexLiveLeases.
  absl::Status Recover();
  // The receipt handle secret, created (written synced) on first open.
  absl::Status LoadHandleSecret();
  // Policies, progress and leases from every "group/" record.
  absl::Status LoadGroupState();
  // If the store's tail was lost in a crash, offsets at/after its end will be assigned to new
  // messages: drops leases there and clamps consume offsets to the end (one synced write).
  absl::Status ReconcileWithStore();

  Progress* GetProgress(const QueueKey& key);
  Progress* FindProgress(const QueueKey& key) const;
  GroupState* GetGroup(const std::string& group);

  // AckBatch's steps. DecodeAckHandles: decodes each handle, checks its group, finds its
  // Progress (no lock held). MatchLiveLeases (every owner's mu held): a handle naming a live,
  // unparked lease of its epoch ends it (once per batch); any other is stale. CommitAcks (the
  // same locks held): writes the drops in one batch, then erases the leases and wakes FIFO
  // receivers; a failed write is every acked handle's result.
  void DecodeAckHandles(const std::string& group, const std::vector<std::string_view>& handles,
                        AckBatchState* st) const;
  static void MatchLiveLeases(AckBatchState* st);
  void CommitAcks(const std::string& group, AckBatchState* st);
  GroupPolicy PolicyOf(const std::string& group);
  // Whether `group` consumes FIFO topics in message-group order: its stored delivery order, or
  // `by_default` when none is stored (ConsumerServiceDeps::group_orderly).
  bool ConsumesInOrder(const std::string& group, bool by_default) const;

  // Receive helpers (receive.cc; the scans of one queue in receive_scan.cc).
  absl::StatusOr<int> QueueCountOf(const std::string& topic) const;
  // Starts *t for a scan of `p` (p->mu held): from = the consume offset, or the earliest
  // retained message when that is later. Returns the queue's end offset.
  int64_t BeginScan(Progress* p, Taken* t) const;
  // Reads k's queue from `from` (below `max`) in chunks of at most room() records (the number
  // still wanted), calling visit(v) on each record while room() > 0; returns the offset after
  // the last record visited (retention gaps skipped).
  using RecordVisit = std::function<absl::Status(const record::RecordView&)>;
  // `fits`: whether the scan may go on to this record (false stops it before the record, which
  // the next Receive reads again), e.g. Taken::Fits for the byte budget.
  absl::StatusOr<int64_t> ScanQueue(const QueueKey& k, int64_t from, int64_t max,
                                    const std::function<int()>& room,
                                    const std::function<bool(const record::RecordView&)>& fits,
                                    const RecordVisit& visit);
  // A message whose receive answer would exceed req.max_message_bytes (p->mu held): copied to
  // the group's DLQ with a warning, or only skipped with one when read from a DLQ topic (a copy
  // would land in the same topic). The caller counts it as consumed. Errors: the DLQ put's.
  absl::Status SetAsideUnanswerable(const QueueKey& k, const record::RecordView& m,
                                    const ReceiveRequest& req, uint32_t attempt, int64_t now);
  // A TakenMessage of `v` (decoded, or its record bytes when `raw`).
  static TakenMessage Take(const record::RecordView& v, bool raw);
  // Scans `p` (p->mu held) for up to `want` messages; fills *t without changing `p`.
  absl::Status ReceiveFrom(Progress* p, const ReceiveRequest& req, const GroupPolicy& policy,
                           int64_t now, int want, Taken* t);
  // ReceiveFrom for a FIFO queue: the due heads of parked groups first, then new messages;
  // one live lease per message group.
  absl::Status ReceiveFromFifo(Progress* p, const ReceiveRequest& req, const GroupPolicy& policy,
                               int64_t now, int want, Taken* t);
  // ReceiveFromFifo, first step: hands out again the parked heads of their groups whose
  // redelivery time has come (or that waited behind their group), each followed by up to
  // req.max_per_group - 1 next parked entries of its group, while `want` and the byte budget
  // allow; *parked drops by one per entry handled.
  absl::Status RedeliverDueHeads(Progress* p, const ReceiveRequest& req,
                                 const GroupPolicy& policy, int64_t now, int want, Taken* t,
                                 size_t* parked);
  // One parked entry of `p` at `offset` handed out again into *t (t->replaced), or set aside
  // (t->dropped: gone, unanswerable, past the TTL); *over_budget when it does not fit the
  // byte budget (it stays parked).
  absl::Status RedeliverParked(Progress* p, const ReceiveRequest& req, const GroupPolicy& policy,
                               int64_t now, int64_t offset, Taken* t, bool* over_budget);
  // Adds `m` to *t under `lease` renewed for this Receive (epoch + 1, not parked, invisible
  // until now + req.invisible_ms); returns that lease.
  static LeaseRecord TakeFifo(const record::RecordView& m, LeaseRecord lease,
                              const ReceiveRequest& req, int64_t now, Taken* t);
  // Wakes long polls waiting on `topic` (a FIFO group unblocked without a new message).
  void WakeReceivers(const std::string& topic);
  // One pass over `all` (locked here; with !wait_for_locks only those not busy, *skipped tells
  // whether any was left out): one write, then the leases and their expiry entries.
  absl::Status ReceiveOnce(const std::vector<Progress*>& all, const ReceiveRequest& req,
                           bool topic_fifo, bool wait_for_locks, bool* skipped,
                           std::vector<ReceivedMessage>* out);
  // ReceiveOnce's steps. Locks `all` (every one, in address order; or with !wait_for_locks
  // only those not busy, *skipped telling whether any was left out) into *sources / *locks.
  static void LockSources(const std::vector<Progress*>& all, bool wait_for_locks,
                          std::vector<Progress*>* sources,
                          std::vector<std::unique_lock<std::mutex>>* locks, bool* skipped);
  // Scans the locked `sources` in order until req.max_messages / req.max_bytes are reached;
  // appends a Taken per queue with anything new and counts the messages in *count. An error
  // stops the scan; what *taken holds by then is still valid.
  absl::Status ScanSources(const std::vector<Progress*>& sources, const ReceiveRequest& req,
                           bool topic_fifo, int64_t now, std::vector<Taken>* taken, int* count);
  // Stages the group-state records of `taken` (progress, lease blocks) in `batch`; sets each
  // new lease's block.
  static void StageTaken(std::vector<Taken>* taken, rocksdb::WriteBatch* batch);
  // After the batch is written: applies `taken` to the Progress objects (offsets, leases,
  // expiry entries at `until`) and appends the received messages to *out.
  void ApplyTaken(std::vector<Taken>* taken, int64_t until, std::vector<ReceivedMessage>* out);
  // Adds entries for every live lease (open; compaction). Takes each Progress::mu in turn.
  void IndexLiveLeases();
  // Rebuilds the index from the live leases when stale entries (acked or renewed leases)
  // outnumber them by far: more than 4 x (in flight + 1024) and twice the size after the last
  // rebuild. Worker thread.
  void MaybeCompactExpiries();
  // RunUntilIdle without the compaction: expires what is due.
  absl::Status RunDueExpiries();

  // Validates a handle and locks its Progress. On success *lock holds p->mu and *lease points
  // into p->leases.
  absl::Status LockLease(const std::string& group, const std::string& handle, Receipt* receipt,
                         Progress** p, std::unique_lock<std::mutex>* lock,
                         LeaseRecord** lease);

  // Ends a live lease of `p` (p->mu held) without an ack: puts a retry copy into
  // %RETRY%<group> at now + delay (nullopt: the backoff schedule), or the DLQ after
  // max_attempts / past TTL (FIFO: parks the entry in place). `batch` gets the lease change and
  // is written to the WAL (WriteState).
  absl::Status EndLease(Progress* p, int64_t offset, std::optional<int64_t> delay_ms,
                        rocksdb::WriteBatch* batch);
  // FIFO batches: the live leases of `offset`'s message group after it in `p` (p->mu held),
  // as parked entries waiting behind the group (epoch + 1, attempt kept), in offset order.
  static std::vector<BlockLease> Followers(const Progress* p, int64_t offset);
  // Stages in `batch` the records holding leases of `p` (p->mu held) as they will be once the
  // leases at `drop` (sorted) are gone and those in `replace` (sorted by offset, each already
  // in p->leases) are substituted; p is unchanged.
  static void StageLeases(const Progress* p, const std::vector<int64_t>& drop,
                          const std::vector<BlockLease>& replace, rocksdb::WriteBatch* batch);
  // Processes one due expiry entry: expires the leases of e.p in [e.first, e.last] whose
  // invisible_until_ms <= now (lease_mu_ held).
  absl::Status ExpireRange(const Expiry& e);
  absl::Status WriteSynced(rocksdb::WriteBatch* batch);
  // WAL write without fsync; the syncer makes it durable within kWalSyncIntervalMs.
  absl::Status WriteState(rocksdb::WriteBatch* batch);
  // Syncs the WAL if anything was written unsynced since the last sync.
  absl::Status SyncIfDirty();

  void WorkerLoop();
  void SyncLoop();

  Clock* const clock_;
  MessageStore* const store_;
  TimerStore* const timers_;
  rocksdb::DB* const db_;
  std::function<absl::StatusOr<int>(const std::string&)> queue_count_;
  std::function<bool(const std::string&)> is_fifo_;
  std::function<std::optional<bool>(const std::string&)> group_orderly_;
  std::function<absl::Status(uint64_t)> admit_state_write_;
  std::function<absl::Status(const rocksdb::WriteBatch&)> log_state_write_;
  uint64_t secret_ = 0;

  mutable std::mutex map_mu_;
  std::map<QueueKey, std::unique_ptr<Progress>> progress_;
  std::map<std::string, std::unique_ptr<GroupState>> groups_;

  RetryCopyWriter copies_{clock_, store_, timers_};

  std::mutex lease_mu_;
  LeaseExpiryIndex expiries_;

  // Long-poll and worker wake-ups.
  LongPollWake wake_;  // bumped while waiters_ > 0
  std::atomic<int> waiters_{0};
  std::atomic<bool> stopping_{false};
  std::thread worker_;

  // Background WAL sync.
  std::atomic<bool> wal_dirty_{false};
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  Clock* const wal_sync_clock_;  // ConsumerServiceDeps::wal_sync_clock (nullptr: real time)
  std::thread syncer_;
};

}  // namespace tokimq::consumer
