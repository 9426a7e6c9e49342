// ConsumerServiceImpl: the RocksDB + TimerStore backed ConsumerService (see
// broker/consumer_service.h for the contract, docs/formats/group-state.md for what is stored and
// docs/operations.md "Delivery guarantees" for when duplicates happen).
//
// State: one Progress per QueueKey (group, topic, read topic, queue id) holding the consume
// offset (next queue offset not yet handed out) and the live leases above it. Offsets below the
// consume offset without a lease are done (acked, expired into a retry copy, moved to the DLQ or
// skipped by the tag filter).
//
// Locking: map_mu_ guards the maps of Progress / GroupState objects (never erased, so pointers
// stay valid). Each Progress has its own mutex held while handing out, acking, renewing or
// expiring its leases, including the RocksDB write that records the change, so the order of
// writes for one queue is the order of the in-memory changes. A Receive locks every Progress it
// may read from (the retry view and the topic's queues) in address order for the whole call;
// AckBatch does the same with the ones its handles name; everything else holds at most one.
// (A Receive first try-locks and skips busy queues; it waits only if that found nothing.)
// lease_mu_ serialises expiry processing (lease_mu_ before any Progress::mu); expiry_mu_
// guards the expiry index only and is never held while taking another lock. No lock is held by
// OnDispatch beyond wait_mu_, so store/timer callbacks on the putting thread cannot deadlock
// with a Receive that is itself putting (a TTL move to the DLQ).
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
// Expiry: an in-memory index (expiries_) of (deadline, queue, offset range), one entry per
// queue per Receive and one per renewal or FIFO redelivery time. It is not persisted: on open
// every persisted lease gets an entry again, so a lease never lacks an expiry. An entry is a
// hint, not a fact: when its deadline comes, the leases in its range whose
// invisible_until_ms has passed expire (a renewed lease has a later time and its own entry; an
// acked one is gone), so stale entries cost a lookup and nothing else. (Brokers before
// 2026-11-30 put a lease-expiry marker message through the TimerStore per Receive instead; that
// was about a tenth of the broker's CPU time in `tokimq-bench --mode lease`. Markers such a
// broker left in its lease topic are no longer read: recovery covers their leases.)
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "broker/consumer_service.h"
#include "commitlog/message_store.h"
#include "common/clock.h"
#include "common/log_limiter.h"
#include "consumer/group_state.h"
#include "rocksdb/db.h"
#include "timerstore/timer_store.h"

namespace tokimq::consumer {

// Group-state WAL sync period of the background syncer.
inline constexpr int64_t kWalSyncIntervalMs = 50;

// Bytes a stored record can take in a receive answer at most: the record, its key and tag
// again as fields of their own, and the fixed fields (ReceiveRequest::max_message_bytes).
int64_t ReceiveAnswerBytes(const record::RecordView& v);

// Limits for request validation.
inline constexpr int kMaxReceiveBatch = 1024;
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
  void OnDispatch(const std::string& topic, int32_t queue_id, int64_t queue_offset) override;
  absl::Status RunUntilIdle() override;
  int64_t ExpiryIndexEntries() const override;
  absl::Status Start() override;
  absl::Status Stop() override;

 private:
  struct Progress {
    Progress(QueueKey k, bool is_fifo) : key(std::move(k)), fifo(is_fifo) {}
    std::mutex mu;
    const QueueKey key;
    // A FIFO topic's own queue: message groups block (ReceiveFromFifo); expired and nacked
    // leases are parked in place instead of copied to the retry topic. Guarded by mu; follows
    // the topic's type (SetFifo) when a topic is deleted and re-created with another type.
    bool fifo;
    int64_t consume_offset = -1;  // -1: not yet initialised from the store
    // Queue offset -> live lease (FIFO: or parked entry). The leases of one block are
    // contiguous in this map (a block holds offsets handed out by one Receive, and those ranges
    // never interleave).
    std::map<int64_t, LeaseRecord> leases;

    // FIFO queues: an index over `leases` so a Receive need not walk every parked entry.
    // groups: message group -> its offsets in `leases` (the first is the group's head);
    // ready: parked entries that head their group (or have none), i.e. redeliverable once
    // their time comes; parked: number of parked entries.
    absl::flat_hash_map<std::string, std::set<int64_t>> groups;
    std::set<int64_t> ready;
    size_t parked = 0;

    // Every change to `leases` of a FIFO queue goes through these (mu held); for other queues
    // they only change `leases`.
    void SetLease(int64_t offset, LeaseRecord lease);
    void EraseLease(int64_t offset);
    // Switches FIFO handling on or off and rebuilds the index. Off is refused (stays FIFO)
    // while parked entries remain: only FIFO handling hands them out.
    void SetFifo(bool on);

   private:
    void Link(int64_t offset, const LeaseRecord& lease);
    void Unlink(int64_t offset, const LeaseRecord& lease);
  };
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
    std::atomic<uint32_t> next_queue{0};  // round-robin start for Receive
  };

  explicit ConsumerServiceImpl(ConsumerServiceDeps deps);
  absl::Status Recover();

  Progress* GetProgress(const QueueKey& key);
  Progress* FindProgress(const QueueKey& key) const;
  GroupState* GetGroup(const std::string& group);
  GroupPolicy PolicyOf(const std::string& group);

  // Receive helpers (receive.cc).
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
  // Wakes long polls waiting on `topic` (a FIFO group unblocked without a new message).
  void WakeReceivers(const std::string& topic);
  // One pass over `all` (locked here; with !wait_for_locks only those not busy, *skipped tells
  // whether any was left out): one write, then the leases and their expiry entries.
  absl::Status ReceiveOnce(const std::vector<Progress*>& all, const ReceiveRequest& req,
                           bool topic_fifo, bool wait_for_locks, bool* skipped,
                           std::vector<ReceivedMessage>* out);
  uint64_t TopicGen(const std::string& topic) const;  // wait_mu_ held
  // Adds an expiry entry: at `deadline_ms`, the leases of `p` in [first, last] whose time has
  // come expire (FIFO parked entries due then wake long polls). Any thread, any locks held
  // (takes only expiry_mu_).
  void ScheduleExpiry(int64_t deadline_ms, Progress* p, int64_t first, int64_t last);
  // Time of the earliest expiry entry, INT64_MAX when none.
  int64_t NextExpiryMs();
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
  // max_attempts / past TTL. `batch` gets the lease deletion and is written synced.
  absl::Status EndLease(Progress* p, int64_t offset, std::optional<int64_t> delay_ms,
                        rocksdb::WriteBatch* batch);
  // Writes a copy of `m` (read from k.read_topic) into the DLQ (now) or into the retry topic
  // (at deliver_ms) with DELIVERY_ATTEMPT = `attempt` and ORIGIN_TOPIC = k.topic.
  // A copy whose retry / DLQ topic the name rule refuses (a group named before the rule), or
  // that the store refuses, is parked in kPoisonTopic instead (ParkCopy): OK, the lease ends.
  absl::Status PutCopy(const QueueKey& k, Message m, uint32_t attempt, bool to_dlq,
                       int64_t deliver_ms);
  // Parks `copy` (destination in copy.topic) in kPoisonTopic with POISON_* properties (`source`:
  // "retry" or "dlq"; `why`: the refusal). Without its body if the store refuses it whole;
  // dropped (logged) if even that is refused. Errors: transient store errors only.
  absl::Status ParkCopy(Message copy, const char* source, const absl::Status& why);
  // When the broker first stored `m` (retry copies keep the original's time): TTL counts from it.
  static int64_t FirstStoreMs(const Message& m);
  static int64_t FirstStoreMs(const record::RecordView& v);
  // Stages in `batch` the records holding leases of `p` (p->mu held) as they will be once the
  // leases at `drop` (sorted) are gone and those in `replace` (sorted by offset, each already
  // in p->leases) are substituted; p is unchanged.
  static void StageLeases(const Progress* p, const std::vector<int64_t>& drop,
                          const std::vector<BlockLease>& replace, rocksdb::WriteBatch* batch);
  // Processes one due expiry entry: expires the leases of e.p in [e.first, e.last] whose
  // invisible_until_ms <= now (lease_mu_ held).
  struct Expiry {
    Progress* p = nullptr;
    int64_t first = 0;
    int64_t last = 0;
  };
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
  LogLimiter poison_log_{10, 1000};  // ParkCopy: one line per parked copy, at most 10 a second
  rocksdb::DB* const db_;
  std::function<absl::StatusOr<int>(const std::string&)> queue_count_;
  std::function<bool(const std::string&)> is_fifo_;
  std::function<absl::Status(uint64_t)> admit_state_write_;
  uint64_t secret_ = 0;

  mutable std::mutex map_mu_;
  std::map<QueueKey, std::unique_ptr<Progress>> progress_;
  std::map<std::string, std::unique_ptr<GroupState>> groups_;

  std::mutex lease_mu_;
  // Expiry index (class comment): deadline ms -> entry.
  mutable std::mutex expiry_mu_;
  std::condition_variable expiry_cv_;  // an entry earlier than all others arrived, or Stop()
  std::multimap<int64_t, Expiry> expiries_;
  size_t expiries_after_compaction_ = 0;  // guarded by expiry_mu_

  // Long-poll and worker wake-ups.
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::map<std::string, uint64_t> topic_gen_;  // guarded by wait_mu_; bumped while waiters_ > 0
  std::atomic<int> waiters_{0};
  std::atomic<bool> stopping_{false};
  std::thread worker_;

  // Background WAL sync.
  std::atomic<bool> wal_dirty_{false};
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  std::thread syncer_;
};

}  // namespace tokimq::consumer
