// The actors of the order-timeout job, each on its own threads, each thread with its own
// OrderDb connection to <state-dir>/orders.db:
//  - OrderService: creates orders (the INSERT committed in SQLite) and sends one delay message
//    per order, keyed by order id, deliver time = the order's payment deadline; batches are
//    pipelined (SendBatchAsync with a window of batches in flight per producer connection).
//  - PaymentSimulator: pays a deterministic share of the orders at a deterministic time before
//    their deadline (so --resume pays the same orders): UNPAID -> PAID, process-once by a
//    payment id.
//  - Canceller: SimpleConsumer threads receive the timeout messages and, in one SQLite
//    transaction per received batch, cancel every order still UNPAID and due and record each
//    message id (client/sqlite_process_once.h); only after COMMIT do they ACK. A redelivered
//    message finds its id and is only ACKed. Early (before-deadline) deliveries are not acted
//    on: they are NACKed with the remaining delay and counted.
//
// Ownership: all borrow the Clock and Metrics, which outlive them.
// Thread-safety: Start/Stop/Join from one controlling thread; Schedule from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/connection.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "common/clock.h"
#include "order_timeout/order_db.h"

namespace tokimq::order_timeout {

struct JobOptions {
  client::ClientOptions client;
  std::string topic = "orders.timeout";
  std::string group = "order-canceller";
  std::string db_path;  // <state-dir>/orders.db
  // Busy timeout 30 s; the threads of this process share one writer mutex.
  client::SqliteOptions sqlite{30'000, true, std::make_shared<std::mutex>()};
  int producers = 2;
  int consumers = 8;
  int batch = 256;          // messages per send request (and orders per INSERT transaction)
  int window = 16;          // send requests in flight per producer
  int receive_batch = 128;  // max messages per receive
  int64_t invisible_ms = 10'000;
  // true: orders are created by TransactionalCreator (the topic must be a TRANSACTION topic);
  // false: by OrderService, a plain send after the INSERT (a DELAY topic).
  bool transactional = true;
};

struct Metrics {
  std::atomic<uint64_t> sent{0}, send_errors{0};
  std::atomic<uint64_t> received{0}, cancelled_now{0}, duplicates{0}, timeout_after_paid{0};
  std::atomic<uint64_t> already_cancelled{0};
  std::atomic<uint64_t> early{0}, foreign{0}, receive_errors{0}, ack_errors{0}, db_errors{0};
  std::atomic<uint64_t> paid_now{0}, pay_refused{0}, pay_window_missed{0};
  // Transactional creation (transactional_creator.h): failed Ends (left to the check-back), the
  // checker's answers, and timeout messages received for an order that does not exist (an
  // order must exist iff its message was committed: must stay 0).
  std::atomic<uint64_t> tx_end_errors{0}, checks_commit{0}, checks_rollback{0}, checks_unknown{0};
  std::atomic<uint64_t> orphan_timeouts{0};
  std::atomic<bool> fatal{false};  // the database cannot be opened: nothing more may be ACKed
};

// The message body: "<run id, 16 hex digits>:<order id>".
std::string TimeoutBody(uint64_t run_id, uint64_t order_id);
bool ParseTimeoutBody(const std::string& body, uint64_t* run_id, uint64_t* order_id);
// The timeout message of order `id`: key "order-<id>", tag "timeout", deliver at the deadline.
// User property of a timeout message: its order's deadline (ms since epoch), decimal.
inline constexpr char kDeadlineProperty[] = "order_deadline_ms";
client::OutgoingMessage TimeoutMessage(const JobOptions& o, uint64_t run_id, uint64_t id,
                                       int64_t deadline_ms);

// What the canceller did with one received batch.
struct BatchResult {
  std::vector<std::string> ack;  // receipt handles to ACK (the transaction committed)
  uint64_t applied = 0;          // orders cancelled by this batch's transaction
};

// Applies one received batch: one SQLite transaction (cancel + processed id per message), then
// says which handles may be ACKed. Early deliveries are NACKed here. `lateness`: receive time -
// deliver time of first deliveries is appended (may be null).
BatchResult HandleTimeouts(OrderDb& db, client::SimpleConsumer& consumer,
                           const std::vector<client::ReceivedMessage>& received, int64_t now_ms,
                           Metrics* metrics, std::vector<int64_t>* lateness);

class PaymentSimulator {
 public:
  PaymentSimulator(JobOptions options, RunConfig config, Clock& clock, Metrics* metrics);
  ~PaymentSimulator();

  // Whether, and when (ms since epoch), order `id` with this deadline will be paid.
  static bool WillPay(const RunConfig& config, uint64_t id);
  static int64_t PayAtMs(const RunConfig& config, uint64_t id, int64_t deadline_ms);
  // The payment's idempotency key (its "message id" in processed_messages).
  static std::string PaymentId(const RunConfig& config, uint64_t id);

  // Plans the payment of `id` if WillPay; no-op otherwise.
  void Schedule(uint64_t id, int64_t deadline_ms);
  void Start();
  void Stop();

 private:
  void Loop();

  JobOptions options_;
  const RunConfig config_;
  Clock& clock_;
  Metrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  using Entry = std::pair<int64_t, uint64_t>;  // (pay at ms, order id)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> due_;
  bool stop_ = false;
  std::thread thread_;
};

class OrderService {
 public:
  // `resend`: --resume, orders created but not known to be sent (id, deadline).
  OrderService(JobOptions options, RunConfig config, PaymentSimulator* payer, Clock& clock,
               Metrics* metrics, std::vector<std::pair<uint64_t, int64_t>> resend = {});
  ~OrderService();
  // Creates every order not yet created and sends the timeout message of every created order
  // not yet known to be sent (--resume), on options.producers threads.
  void Start();
  bool done() const { return done_threads_.load() == threads_.size(); }
  void Stop();  // makes retries give up

 private:
  void ProducerLoop();
  // Sends `orders` again, batch by batch, until stored or Stop(); returns the stored ids.
  std::vector<uint64_t> SendUntilStored(client::Producer& producer,
                                        std::vector<std::pair<uint64_t, int64_t>> orders);

  JobOptions options_;
  const RunConfig config_;
  PaymentSimulator* payer_;
  Clock& clock_;
  Metrics* metrics_;
  std::vector<std::pair<uint64_t, int64_t>> resend_;
  std::atomic<size_t> next_resend_{0};
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> stop_{false};
  std::atomic<size_t> done_threads_{0};
  std::vector<std::thread> threads_;
};

class Canceller {
 public:
  Canceller(JobOptions options, RunConfig config, Clock& clock, Metrics* metrics);
  ~Canceller();
  void Start();
  void Stop();  // joins
  // Receive time - deliver time of every first delivery, ms (valid after Stop).
  std::vector<int64_t> TakeLateness();

 private:
  void Loop(size_t index);

  JobOptions options_;
  const RunConfig config_;
  Clock& clock_;
  Metrics* metrics_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::vector<std::vector<int64_t>> lateness_;  // one per thread
};

}  // namespace tokimq::order_timeout
