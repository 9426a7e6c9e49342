#include "order_timeout/workers.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>

#include "client/producer.h"

namespace tokimq::order_timeout {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

// Opens this thread's connection; a failure stops the job (nothing may be ACKed without it).
std::unique_ptr<OrderDb> OpenDb(const JobOptions& o, Clock& clock, Metrics* metrics) {
  auto db = OrderDb::Open(o.db_path, o.sqlite, clock);
  if (db.ok()) return std::move(*db);
  std::fprintf(stderr, "order-timeout: %s\n", db.status().ToString().c_str());
  metrics->fatal = true;
  return nullptr;
}

}  // namespace

client::OutgoingMessage TimeoutMessage(const JobOptions& o, uint64_t run_id, uint64_t id,
                                       int64_t deadline_ms) {
  client::OutgoingMessage m;
  m.topic = o.topic;
  m.body = TimeoutBody(run_id, id);
  m.key = "order-" + std::to_string(id);
  m.tag = "timeout";
  m.deliver_at_ms = deadline_ms;
  // The check-back compares it with the order row's deadline: a half left by a killed run for an
  // order that --resume created again (new deadline, new message) must not commit as well.
  m.properties[kDeadlineProperty] = std::to_string(deadline_ms);
  return m;
}

std::string TimeoutBody(uint64_t run_id, uint64_t order_id) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64 ":%" PRIu64, run_id, order_id);
  return buf;
}

bool ParseTimeoutBody(const std::string& body, uint64_t* run_id, uint64_t* order_id) {
  if (body.size() < 18 || body.size() > 40 || body[16] != ':') return false;
  uint64_t run = 0, id = 0;
  for (size_t i = 0; i < 16; ++i) {
    char c = body[i];
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    run = run << 4 | static_cast<uint64_t>(v);
  }
  for (size_t i = 17; i < body.size(); ++i) {
    if (body[i] < '0' || body[i] > '9' || id > (UINT64_MAX - 9) / 10) return false;
    id = id * 10 + static_cast<uint64_t>(body[i] - '0');
  }
  *run_id = run;
  *order_id = id;
  return true;
}

// ---- the canceller's batch ----

BatchResult HandleTimeouts(OrderDb& db, client::SimpleConsumer& consumer,
                           const std::vector<client::ReceivedMessage>& received, int64_t now_ms,
                           Metrics* metrics, std::vector<int64_t>* lateness) {
  BatchResult out;
  std::vector<OrderChange> changes;
  std::vector<const client::ReceivedMessage*> ours;
  for (const client::ReceivedMessage& m : received) {
    uint64_t msg_run = 0, id = 0;
    if (!ParseTimeoutBody(m.body, &msg_run, &id) || msg_run != db.config().run_id) {
      Bump(metrics->foreign);  // another run's message on the same topic: not ours to judge
      out.ack.push_back(m.receipt_handle);
      continue;
    }
    Bump(metrics->received);
    if (lateness != nullptr && m.delivery_attempt == 1) lateness->push_back(now_ms - m.deliver_ms);
    changes.push_back({m.message_id, id});
    ours.push_back(&m);
  }
  if (changes.empty()) return out;
  auto results = db.Cancel(changes, now_ms);
  if (!results.ok()) {  // nothing committed: ACK none of ours, the leases bring them back
    Bump(metrics->db_errors);
    return out;
  }
  for (size_t i = 0; i < changes.size(); ++i) {
    const absl::StatusOr<client::ProcessOutcome>& r = (*results)[i];
    const std::string& handle = ours[i]->receipt_handle;
    if (r.ok()) {
      if (*r == client::ProcessOutcome::kApplied) {
        Bump(metrics->cancelled_now);
        ++out.applied;
      } else {
        Bump(metrics->duplicates);  // redelivered after a commit whose ACK never came
      }
      out.ack.push_back(handle);
      continue;
    }
    if (r.status().code() != absl::StatusCode::kFailedPrecondition) {
      Bump(metrics->db_errors);  // not ACKed: redelivered after the lease
      continue;
    }
    auto st = db.Status(changes[i].order_id);  // why did the guarded UPDATE change 0 rows?
    if (!st.ok()) {
      Bump(metrics->db_errors);
      continue;
    }
    switch (st->first) {
      case OrderStatus::kPaid:
        Bump(metrics->timeout_after_paid);
        break;
      case OrderStatus::kCancelled:
        Bump(metrics->already_cancelled);  // by another message for the same order (--resume)
        break;
      case OrderStatus::kNone:
        Bump(metrics->orphan_timeouts);  // a committed timeout of an order that never existed
        break;
      case OrderStatus::kUnpaid:
        // Delivered before the deadline: a broker bug. Leave the order alone, ask again later.
        Bump(metrics->early);
        (void)consumer.Nack(handle, std::max<int64_t>(1, st->second - now_ms + 1));
        continue;
    }
    out.ack.push_back(handle);
  }
  return out;
}

// ---- PaymentSimulator ----

PaymentSimulator::PaymentSimulator(JobOptions options, RunConfig config, Clock& clock, Metrics* m)
    : options_(std::move(options)), config_(config), clock_(clock), metrics_(m) {}

PaymentSimulator::~PaymentSimulator() { Stop(); }

bool PaymentSimulator::WillPay(const RunConfig& config, uint64_t id) {
  return Mix(config.seed ^ (id * 2 + 1)) % 1'000'000 < config.paid_ppm;
}

int64_t PaymentSimulator::PayAtMs(const RunConfig& config, uint64_t id, int64_t deadline_ms) {
  // Uniform in [10 %, 80 %] of the timeout after creation: at least 20 % before the deadline.
  double u = static_cast<double>(Mix(config.seed ^ (id * 2 + 2)) >> 11) * 0x1.0p-53;
  int64_t offset = static_cast<int64_t>(static_cast<double>(config.timeout_ms) * (0.1 + 0.7 * u));
  return deadline_ms - config.timeout_ms + offset;
}

std::string PaymentSimulator::PaymentId(const RunConfig& config, uint64_t id) {
  return "pay-" + TimeoutBody(config.run_id, id);
}

void PaymentSimulator::Schedule(uint64_t id, int64_t deadline_ms) {
  if (!WillPay(config_, id)) return;
  int64_t at = PayAtMs(config_, id, deadline_ms);
  std::lock_guard<std::mutex> lock(mu_);
  due_.emplace(at, id);
  cv_.notify_one();
}

void PaymentSimulator::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void PaymentSimulator::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void PaymentSimulator::Loop() {
  std::unique_ptr<OrderDb> db = OpenDb(options_, clock_, metrics_);
  if (db == nullptr) return;
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<OrderChange> batch;
  while (!stop_) {
    const int64_t now = clock_.NowMs();
    batch.clear();
    while (!due_.empty() && due_.top().first <= now) {
      batch.push_back({PaymentId(config_, due_.top().second), due_.top().second});
      due_.pop();
    }
    if (batch.empty()) {
      int64_t wait_ms = due_.empty() ? 100 : std::clamp<int64_t>(due_.top().first - now, 1, 100);
      cv_.wait_for(lock, std::chrono::milliseconds(wait_ms));
      continue;
    }
    lock.unlock();
    // The UPDATE's own guard (deadline_ms > now) refuses an expired order: a customer does not
    // pay it. Both outcomes are final, so a failed transaction is the only retry.
    auto results = db->Pay(batch, clock_.NowMs());
    lock.lock();
    if (!results.ok()) {
      Bump(metrics_->db_errors);
      for (const OrderChange& c : batch) due_.emplace(now + 100, c.order_id);
      continue;
    }
    for (const absl::StatusOr<client::ProcessOutcome>& r : *results) {
      if (r.ok()) {
        if (*r == client::ProcessOutcome::kApplied) Bump(metrics_->paid_now);
      } else if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
        Bump(metrics_->pay_refused);  // cancelled, or its deadline passed before it was paid
      } else {
        Bump(metrics_->db_errors);
      }
    }
  }
}

// ---- OrderService ----

OrderService::OrderService(JobOptions options, RunConfig config, PaymentSimulator* payer,
                           Clock& clock, Metrics* metrics,
                           std::vector<std::pair<uint64_t, int64_t>> resend)
    : options_(std::move(options)),
      config_(config),
      payer_(payer),
      clock_(clock),
      metrics_(metrics),
      resend_(std::move(resend)) {}

OrderService::~OrderService() {
  Stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void OrderService::Start() {
  for (int i = 0; i < std::max(1, options_.producers); ++i) {
    threads_.emplace_back([this] { ProducerLoop(); });
  }
}

void OrderService::Stop() { stop_ = true; }

void OrderService::ProducerLoop() {
  // Shared with the send callbacks, which run on whichever thread reads the responses.
  struct Window {
    std::mutex mu;
    std::condition_variable cv;
    int in_flight = 0;
    std::vector<uint64_t> acked;                       // to mark sent in the next transaction
    std::vector<std::pair<uint64_t, int64_t>> failed;  // retried below
  };
  auto window = std::make_shared<Window>();
  std::unique_ptr<OrderDb> db = OpenDb(options_, clock_, metrics_);
  client::Producer producer(options_.client);
  const uint64_t n = config_.orders;
  const uint64_t batch = static_cast<uint64_t>(std::max(1, options_.batch));
  auto send = [&](std::vector<std::pair<uint64_t, int64_t>> orders) {
    std::vector<client::OutgoingMessage> msgs;
    msgs.reserve(orders.size());
    for (const auto& [id, deadline] : orders) {
      msgs.push_back(TimeoutMessage(options_, config_.run_id, id, deadline));
    }
    std::unique_lock<std::mutex> lock(window->mu);
    window->cv.wait(lock, [&] { return window->in_flight < std::max(1, options_.window); });
    ++window->in_flight;
    lock.unlock();
    producer.SendBatchAsync(msgs, [this, window, orders = std::move(orders)](
                                      absl::StatusOr<std::vector<client::SendReceipt>> r) {
      r.ok() ? Bump(metrics_->sent, orders.size()) : Bump(metrics_->send_errors);
      std::lock_guard<std::mutex> lock(window->mu);
      for (const auto& o : orders) {
        if (r.ok()) {
          window->acked.push_back(o.first);
        } else {
          window->failed.push_back(o);
        }
      }
      --window->in_flight;
      window->cv.notify_all();
    });
  };
  auto take_acked = [&] {
    std::lock_guard<std::mutex> lock(window->mu);
    return std::exchange(window->acked, {});
  };
  while (db != nullptr && !stop_ && !metrics_->fatal) {
    // --resume first: orders created before whose message may never have been stored.
    const size_t r = next_resend_.fetch_add(batch);
    if (r < resend_.size()) {
      const size_t end = std::min(resend_.size(), r + batch);
      send({resend_.begin() + static_cast<std::ptrdiff_t>(r),
            resend_.begin() + static_cast<std::ptrdiff_t>(end)});
      continue;
    }
    const uint64_t first = next_id_.fetch_add(batch);
    if (first >= n) break;
    std::vector<uint64_t> ids;
    for (uint64_t id = first; id < std::min(n, first + batch); ++id) ids.push_back(id);
    const int64_t now = clock_.NowMs();
    const int64_t deadline = now + config_.timeout_ms;
    // The order must exist (committed) before its timeout message can reach the canceller.
    auto created = db->CreateOrders(ids, deadline, now, take_acked());
    if (!created.ok()) {
      std::fprintf(stderr, "order-timeout: %s\n", created.status().ToString().c_str());
      metrics_->fatal = true;
      break;
    }
    std::vector<std::pair<uint64_t, int64_t>> orders;
    for (uint64_t id : *created) {
      payer_->Schedule(id, deadline);
      orders.emplace_back(id, deadline);
    }
    if (!orders.empty()) send(std::move(orders));
  }
  std::vector<std::pair<uint64_t, int64_t>> retry;
  {
    std::unique_lock<std::mutex> lock(window->mu);
    window->cv.wait(lock, [&] { return window->in_flight == 0; });
    retry.swap(window->failed);
  }
  std::vector<uint64_t> stored = SendUntilStored(producer, std::move(retry));
  window->acked.insert(window->acked.end(), stored.begin(), stored.end());
  if (db != nullptr && !db->MarkSent(take_acked()).ok()) Bump(metrics_->db_errors);
  done_threads_.fetch_add(1);
}

std::vector<uint64_t> OrderService::SendUntilStored(
    client::Producer& producer, std::vector<std::pair<uint64_t, int64_t>> retry) {
  // Failed batches (broker down or restarting): retry synchronously until they go through.
  std::vector<uint64_t> stored;
  const size_t batch = static_cast<size_t>(std::max(1, options_.batch));
  while (!retry.empty() && !stop_ && !metrics_->fatal) {
    size_t take = std::min(retry.size(), batch);
    std::vector<client::OutgoingMessage> msgs;
    for (size_t i = retry.size() - take; i < retry.size(); ++i) {
      msgs.push_back(TimeoutMessage(options_, config_.run_id, retry[i].first, retry[i].second));
    }
    auto r = producer.SendBatch(msgs);
    if (r.ok()) {
      Bump(metrics_->sent, take);
      for (size_t i = retry.size() - take; i < retry.size(); ++i) stored.push_back(retry[i].first);
      retry.resize(retry.size() - take);
    } else {
      Bump(metrics_->send_errors);
      clock_.WaitUntilMs(clock_.NowMs() + 300, std::chrono::milliseconds(300));
    }
  }
  return stored;
}

// ---- Canceller ----

Canceller::Canceller(JobOptions options, RunConfig config, Clock& clock, Metrics* metrics)
    : options_(std::move(options)), config_(config), clock_(clock), metrics_(metrics) {}

Canceller::~Canceller() { Stop(); }

void Canceller::Start() {
  size_t n = static_cast<size_t>(std::max(1, options_.consumers));
  lateness_.resize(n);
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this, i] { Loop(i); });
}

void Canceller::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::vector<int64_t> Canceller::TakeLateness() {
  std::vector<int64_t> all;
  for (std::vector<int64_t>& v : lateness_) {
    all.insert(all.end(), v.begin(), v.end());
    v.clear();
  }
  return all;
}

void Canceller::Loop(size_t index) {
  std::unique_ptr<OrderDb> db = OpenDb(options_, clock_, metrics_);
  if (db == nullptr) return;
  client::SimpleConsumer consumer(options_.client, options_.group);
  client::ReceiveOptions ro;
  ro.max_messages = options_.receive_batch;
  ro.invisible_ms = options_.invisible_ms;
  ro.long_poll_ms = 500;
  while (!stop_ && !metrics_->fatal) {
    auto received = consumer.Receive(options_.topic, ro);
    const int64_t now = clock_.NowMs();
    if (!received.ok()) {
      Bump(metrics_->receive_errors);
      clock_.WaitUntilMs(now + 200, std::chrono::milliseconds(200));
      continue;
    }
    BatchResult batch = HandleTimeouts(*db, consumer, *received, now, metrics_, &lateness_[index]);
    if (batch.ack.empty()) continue;
    auto acked = consumer.AckBatch(batch.ack);  // only after the transaction committed
    if (!acked.ok()) {
      Bump(metrics_->ack_errors, batch.ack.size());
      continue;
    }
    for (const absl::Status& s : *acked) {
      if (!s.ok()) Bump(metrics_->ack_errors);
    }
  }
}

}  // namespace tokimq::order_timeout
