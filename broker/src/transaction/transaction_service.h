// TransactionService: half messages, their end (commit / rollback) with durable op records,
// and the check-back schedule (RocketMQ 5's TransactionalMessageService; docs/transactions.md).
//
// A transactional send stores its message as a *half* in the system topic kHalfTopic (one
// queue), invisible to consumers, with the real topic and queue id in REAL_TOPIC / REAL_QID,
// the transaction id in TX_ID and, when the send asked for one, the deliver time in
// TX_DELIVER_MS. End(COMMIT) writes the *commit copy* — the half's message in its real topic
// (through TimerStore::ScheduleBatch, so a deliver time in the future enters the timer store),
// carrying TX_HALF_OFFSET = the half's physical offset — and then an *op record* in
// kOpTopic (docs/formats/transaction-op.md). End(ROLLBACK) writes only the op record. A half
// left open past its immunity time is offered to the check sink every check interval; after
// max_checks checks it is copied to kUnresolvedTopic (an op record UNRESOLVED follows) for an
// operator, never dropped.
//
// Recovery (Open): every op record of kOpTopic, then every half of kHalfTopic without one is
// pending. A crash between a commit copy and its op record leaves a pending half whose copy
// exists: the CommitLog is scanned from the oldest pending half's offset for records carrying
// TX_HALF_OFFSET (commit copies; in kUnresolvedTopic: unresolved copies), and the missing op
// record is written, so a committed half appears in its topic exactly once. The scan is bounded
// by the age of the oldest pending half (normally immunity + max_checks * interval, ~7.5 min).
// Check counts are not persisted: after a restart every pending half starts again at 0 checks,
// checked at once if its immunity passed.
//
// Retention: a pin provider keeps the segment of the oldest pending half (MessageStore pins).
//
// Thread-safety: every method may be called from any thread. End calls for one half are
// serialised (a second waits for the first); ends of different halves run in parallel.
// Lock order: mu_ only; no store call is made while holding it.
// Durability: Put returns once the halves are durable per the flush policy (PutBatch); End
// returns OK once the op record is (Put).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "commitlog/message.h"
#include "commitlog/message_store.h"

namespace tokimq {
class Clock;
class TimerStore;
}  // namespace tokimq

namespace tokimq::broker {

// The system topics (RocketMQ: RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
// TRANS_CHECK_MAX_TIME_TOPIC).
inline constexpr char kHalfTopic[] = "tokimq_sys_trans_half";
inline constexpr char kOpTopic[] = "tokimq_sys_trans_op";
inline constexpr char kUnresolvedTopic[] = "tokimq_sys_trans_unresolved";
// RocketMQ's per-message immunity property (seconds), honoured on the native API too.
inline constexpr char kCheckImmunityProperty[] = "CHECK_IMMUNITY_TIME_IN_SECONDS";
inline constexpr int64_t kMaxCheckImmunityMs = 3'600'000;

struct TransactionOptions {
  int64_t default_immunity_ms = 6'000;  // RocketMQ transactionTimeOut
  int64_t check_interval_ms = 30'000;   // RocketMQ transactionCheckInterval
  int max_checks = 15;                  // RocketMQ transactionCheckMax
  // Ended transactions remembered for an idempotent End (oldest forgotten first; a forgotten
  // one answers kNotFound).
  size_t max_ended_remembered = 200'000;
  int64_t check_tick_ms = 100;  // Start(): how often the check thread runs RunChecks (real time)
};

// Persisted in op records (TX_OP): never renumbered or renamed.
enum class TxOutcome { kCommit = 1, kRollback = 2, kUnresolved = 3 };

// One half to store: msg.topic / queue_id are the real destination; deliver_ms > now: committed
// into the timer store; immunity_ms > 0.
struct HalfToPut {
  Message msg;
  int64_t deliver_ms = 0;
  int64_t immunity_ms = 0;
};
struct HalfPutResult {
  PutResult put;  // the half's place in kHalfTopic
  std::string transaction_id;
};

// What a check sink gets: the half's message as the producer sent it (REAL_* removed, topic
// and queue id restored) and how many checks this is (1 = first).
struct HalfCheck {
  std::string transaction_id;
  Message msg;
  int check_count = 0;
};
// Hands a check to a live producer of msg.topic; false when there is none (the check still
// counts towards max_checks, as in RocketMQ).
using CheckSink = std::function<bool(const HalfCheck&)>;

struct TransactionStats {
  int64_t pending = 0;
  int64_t oldest_pending_age_ms = 0;
  int64_t commits = 0;
  int64_t rollbacks = 0;
  int64_t checks_sent = 0;
  int64_t checks_without_producer = 0;
  int64_t moved_unresolved = 0;
};

class TransactionService {
 public:
  // Recovers the pending halves (see class comment) and registers the retention pin. `store`
  // and `timers` must outlive the service.
  static absl::StatusOr<std::unique_ptr<TransactionService>> Open(Clock* clock,
                                                                  MessageStore* store,
                                                                  TimerStore* timers,
                                                                  TransactionOptions options);
  ~TransactionService();

  // Stores the halves (one PutBatch) and registers them as pending. Errors as PutBatch.
  absl::StatusOr<std::vector<HalfPutResult>> Put(std::vector<HalfToPut> halves);

  // Ends a half. OK when done, or already ended with the same outcome; kNotFound: unknown
  // message id (or forgotten), transaction id or topic not matching it; kFailedPrecondition:
  // ended otherwise or moved to the unresolved topic. Store errors as Put. `from_check` is
  // written into the op record (TX_SOURCE).
  absl::Status End(const std::string& topic, const std::string& message_id,
                   const std::string& transaction_id, TxOutcome outcome, bool from_check);

  // One round of check-backs at the clock's now: every pending half past its next check time
  // is offered to the sink (or, past max_checks, moved to kUnresolvedTopic). Returns how many
  // halves it handled. The step function the tests drive on a manual clock.
  absl::StatusOr<int> RunChecks();
  void SetCheckSink(CheckSink sink);

  // A background thread calling RunChecks every check_tick_ms. Stop() joins it (idempotent).
  void Start();
  void Stop();

  TransactionStats Stats() const;

 private:
  struct Pending {
    int64_t phys = -1;
    uint32_t size = 0;
    std::string topic;
    std::string transaction_id;
    int64_t store_ms = 0;
    int64_t next_check_ms = 0;
    int checks = 0;
    bool ending = false;  // an End or a move is writing its records
    bool copy_written = false;  // a commit copy is stored, its op record failed: commit only
  };
  struct Ended {
    std::string topic;
    std::string transaction_id;
    TxOutcome outcome;
  };

  TransactionService(Clock* clock, MessageStore* store, TimerStore* timers,
                     TransactionOptions options);
  absl::Status Recover();
  // Recovery: commit / unresolved copies of pending halves written before a crash.
  absl::Status RecoverCopies();
  absl::Status WriteOp(int64_t half_phys, const std::string& message_id, const Pending& p,
                       TxOutcome outcome, const char* source);
  absl::Status WriteCommitCopy(const Pending& p, const Message& half);
  absl::Status MoveUnresolved(const std::string& message_id, const Pending& p);
  // Under mu_: marks `message_id` ended (pending -> ended), updates counters.
  void FinishLocked(const std::string& message_id, TxOutcome outcome);
  void RememberEndedLocked(const std::string& message_id, Ended e);
  std::string NextTransactionId();

  Clock* clock_;
  MessageStore* store_;
  TimerStore* timers_;
  TransactionOptions options_;
  MessageStore::PinId pin_id_ = 0;

  mutable std::mutex mu_;
  std::condition_variable ended_cv_;                   // an `ending` flag cleared
  std::unordered_map<std::string, Pending> pending_;   // message id -> half; mu_
  std::set<int64_t> pending_phys_;                     // mu_: the pin is its first element
  std::unordered_map<std::string, Ended> ended_;       // mu_
  std::deque<std::string> ended_order_;                // mu_: oldest first
  CheckSink sink_;                                     // mu_
  TransactionStats counters_;                          // mu_ (pending fields unused)

  std::atomic<uint64_t> tx_counter_{0};
  uint64_t tx_salt_ = 0;

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stop_ = false;  // thread_mu_
  std::thread thread_;
};

}  // namespace tokimq::broker
