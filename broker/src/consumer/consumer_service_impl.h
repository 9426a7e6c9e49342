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
// expiring its leases; two receivers of one group therefore never lease the same offset.
// lease_mu_ serialises lease-topic processing (lease_mu_ before any Progress::mu). No lock is
// held by OnDispatch beyond wait_mu_, so store/timer callbacks on the putting thread cannot
// deadlock with a Receive that is itself putting (marker Schedule).
//
// Durability: lease creation, ack, renew, nack and expiry are written with WriteOptions::sync.
// Markers are scheduled before the lease is persisted; on open every persisted lease gets a
// fresh marker, so a lease never lacks an expiry even if the timer-topic write was lost.
#pragma once

#include <atomic>
#include <condition_variable>
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
#include "rocksdb/db.h"
#include "timerstore/timer_store.h"

namespace tokimq::consumer {

// Marker message properties (kLeaseTopic, queue 0). LEASE_ENTRIES is "offset:epoch[,...]".
inline constexpr char kMarkGroup[] = "LEASE_GROUP";
inline constexpr char kMarkTopic[] = "LEASE_TOPIC";
inline constexpr char kMarkReadTopic[] = "LEASE_READ_TOPIC";
inline constexpr char kMarkQueueId[] = "LEASE_QID";
inline constexpr char kMarkEntries[] = "LEASE_ENTRIES";

// Limits for request validation.
inline constexpr int kMaxReceiveBatch = 1024;
inline constexpr int64_t kMaxInvisibleMs = 12LL * 3600 * 1000;
inline constexpr int64_t kMaxLongPollMs = 5LL * 60 * 1000;
inline constexpr int64_t kMaxNackDelayMs = 7LL * 24 * 3600 * 1000;

class ConsumerServiceImpl final : public ConsumerService {
 public:
  static absl::StatusOr<std::unique_ptr<ConsumerService>> Create(ConsumerServiceDeps deps);
  ~ConsumerServiceImpl() override;

  absl::StatusOr<std::vector<ReceivedMessage>> Receive(const ReceiveRequest& req) override;
  absl::Status Ack(const std::string& group, const std::string& receipt_handle) override;
  std::vector<absl::Status> AckBatch(const std::string& group,
                                     const std::vector<std::string>& receipt_handles) override;
  absl::StatusOr<std::string> ChangeInvisibleDuration(const std::string& group,
                                                      const std::string& receipt_handle,
                                                      int64_t invisible_ms) override;
  absl::Status Nack(const std::string& group, const std::string& receipt_handle,
                    std::optional<int64_t> delay_ms) override;
  void SetGroupPolicy(const std::string& group, GroupPolicy policy) override;
  int64_t InFlight(const std::string& group) const override;
  int64_t DlqDepth(const std::string& group) const override;
  void OnDispatch(const std::string& topic, int32_t queue_id, int64_t queue_offset) override;
  absl::Status RunUntilIdle() override;
  absl::Status Start() override;
  absl::Status Stop() override;

 private:
  struct Progress {
    explicit Progress(QueueKey k) : key(std::move(k)) {}
    std::mutex mu;
    const QueueKey key;
    int64_t consume_offset = -1;  // -1: not yet initialised from the store
    std::map<int64_t, LeaseRecord> leases;  // queue offset -> live lease
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
  absl::Status ReceiveFrom(Progress* p, const ReceiveRequest& req, int want,
                           std::vector<ReceivedMessage>* out);
  uint64_t TopicGen(const std::string& topic) const;  // wait_mu_ held
  absl::Status ScheduleMarker(const QueueKey& key, const std::vector<int64_t>& offsets,
                              const std::vector<uint32_t>& epochs, int64_t deliver_ms);

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
  absl::Status PutCopy(const QueueKey& k, Message m, uint32_t attempt, bool to_dlq,
                       int64_t deliver_ms);
  // When the broker first stored `m` (retry copies keep the original's time): TTL counts from it.
  static int64_t FirstStoreMs(const Message& m);
  absl::Status HandleMarker(const Message& marker);
  absl::Status WriteSynced(rocksdb::WriteBatch* batch);

  void WorkerLoop();

  Clock* const clock_;
  MessageStore* const store_;
  TimerStore* const timers_;
  rocksdb::DB* const db_;
  std::function<absl::StatusOr<int>(const std::string&)> queue_count_;
  uint64_t secret_ = 0;

  mutable std::mutex map_mu_;
  std::map<QueueKey, std::unique_ptr<Progress>> progress_;
  std::map<std::string, std::unique_ptr<GroupState>> groups_;

  std::mutex lease_mu_;
  int64_t lease_topic_offset_ = 0;  // guarded by lease_mu_

  // Long-poll and worker wake-ups.
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::map<std::string, uint64_t> topic_gen_;  // guarded by wait_mu_; bumped while waiters_ > 0
  std::atomic<int> waiters_{0};
  std::atomic<uint64_t> lease_gen_{0};
  std::atomic<bool> stopping_{false};
  std::thread worker_;
};

}  // namespace tokimq::consumer
