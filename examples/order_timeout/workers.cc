#include "order_timeout/workers.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>

#include "client/producer.h"
#include "client/simple_consumer.h"

namespace tokimq::order_timeout {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

client::OutgoingMessage TimeoutMessage(const JobOptions& o, uint64_t run_id, uint64_t id,
                                       int64_t deadline_ms) {
  client::OutgoingMessage m;
  m.topic = o.topic;
  m.body = TimeoutBody(run_id, id);
  m.key = "order-" + std::to_string(id);
  m.tag = "timeout";
  m.deliver_at_ms = deadline_ms;
  return m;
}

void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

}  // namespace

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

// ---- PaymentSimulator ----

PaymentSimulator::PaymentSimulator(OrderBook* book, OrderLog* log, Clock& clock, Metrics* m)
    : book_(book), log_(log), clock_(clock), metrics_(m) {}

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

void PaymentSimulator::Schedule(uint64_t id, int64_t deadline_ms) {
  if (!WillPay(log_->config(), id)) return;
  int64_t at = PayAtMs(log_->config(), id, deadline_ms);
  std::lock_guard<std::mutex> lock(mu_);
  due_.emplace(at, id);
  cv_.notify_one();
}

void PaymentSimulator::Start() { thread_ = std::thread([this] { Loop(); }); }

void PaymentSimulator::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void PaymentSimulator::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<uint64_t> batch;
  while (!stop_) {
    const int64_t now = clock_.NowMs();
    batch.clear();
    while (!due_.empty() && due_.top().first <= now) {
      batch.push_back(due_.top().second);
      due_.pop();
    }
    if (batch.empty()) {
      int64_t wait_ms = due_.empty() ? 100 : std::clamp<int64_t>(due_.top().first - now, 1, 100);
      cv_.wait_for(lock, std::chrono::milliseconds(wait_ms));
      continue;
    }
    lock.unlock();
    uint64_t max_seq = 0;
    for (uint64_t id : batch) {
      const int64_t t = clock_.NowMs();
      if (t >= book_->deadline(id)) {  // a customer does not pay an expired order
        Bump(metrics_->pay_window_missed);
        continue;
      }
      uint64_t seq = 0;
      PayResult r = book_->Pay(id, t, &seq);
      if (r == PayResult::kPaid) {
        Bump(metrics_->paid_now);
        max_seq = std::max(max_seq, seq);
      } else if (r == PayResult::kCancelled) {
        Bump(metrics_->pay_refused);
      }
    }
    if (max_seq > 0 && !log_->Sync(max_seq).ok()) metrics_->fatal = true;
    lock.lock();
  }
}

// ---- OrderService ----

OrderService::OrderService(JobOptions options, OrderBook* book, OrderLog* log,
                           PaymentSimulator* payer, Clock& clock, Metrics* metrics)
    : options_(std::move(options)),
      book_(book),
      log_(log),
      payer_(payer),
      clock_(clock),
      metrics_(metrics) {}

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
    std::vector<uint64_t> failed;  // ids whose send failed: retried below
  };
  auto window = std::make_shared<Window>();
  client::Producer producer(options_.client);
  const uint64_t n = book_->orders();
  const uint64_t run_id = log_->config().run_id;
  const uint64_t batch = static_cast<uint64_t>(std::max(1, options_.batch));
  while (!stop_ && !metrics_->fatal) {
    const uint64_t first = next_id_.fetch_add(batch);
    if (first >= n) break;
    const uint64_t end = std::min(n, first + batch);
    const int64_t now = clock_.NowMs();
    const int64_t deadline = now + log_->config().timeout_ms;
    std::vector<uint64_t> ids;
    uint64_t max_seq = 0;
    for (uint64_t id = first; id < end; ++id) {
      OrderState st = book_->state(id);
      if (st == OrderState::kNone) {
        max_seq = std::max(max_seq, book_->Create(id, deadline, now));
        payer_->Schedule(id, deadline);
        ids.push_back(id);
      } else if (st == OrderState::kCreated && !book_->sent(id)) {
        ids.push_back(id);  // --resume: created, message maybe never stored
      }
    }
    if (ids.empty()) continue;
    // The order must exist durably before its timeout message can reach the canceller.
    if (max_seq > 0 && !log_->Sync(max_seq).ok()) {
      metrics_->fatal = true;
      break;
    }
    std::vector<client::OutgoingMessage> msgs;
    msgs.reserve(ids.size());
    for (uint64_t id : ids) msgs.push_back(TimeoutMessage(options_, run_id, id, book_->deadline(id)));
    {
      std::unique_lock<std::mutex> lock(window->mu);
      window->cv.wait(lock, [&] { return window->in_flight < std::max(1, options_.window); });
      ++window->in_flight;
    }
    producer.SendBatchAsync(
        msgs, [this, window, ids = std::move(ids)](
                  absl::StatusOr<std::vector<client::SendReceipt>> r) {
          const int64_t t = clock_.NowMs();
          if (r.ok()) {
            for (uint64_t id : ids) book_->MarkSent(id, t);
            Bump(metrics_->sent, ids.size());
          } else {
            Bump(metrics_->send_errors);
          }
          std::lock_guard<std::mutex> lock(window->mu);
          if (!r.ok()) window->failed.insert(window->failed.end(), ids.begin(), ids.end());
          --window->in_flight;
          window->cv.notify_all();
        });
  }
  std::vector<uint64_t> retry;
  {
    std::unique_lock<std::mutex> lock(window->mu);
    window->cv.wait(lock, [&] { return window->in_flight == 0; });
    retry.swap(window->failed);
  }
  // Failed batches (broker down or restarting): retry synchronously until they go through.
  while (!retry.empty() && !stop_ && !metrics_->fatal) {
    size_t take = std::min<size_t>(retry.size(), batch);
    std::vector<uint64_t> ids(retry.end() - static_cast<std::ptrdiff_t>(take), retry.end());
    std::vector<client::OutgoingMessage> msgs;
    for (uint64_t id : ids) msgs.push_back(TimeoutMessage(options_, run_id, id, book_->deadline(id)));
    auto r = producer.SendBatch(msgs);
    if (r.ok()) {
      const int64_t t = clock_.NowMs();
      for (uint64_t id : ids) book_->MarkSent(id, t);
      Bump(metrics_->sent, ids.size());
      retry.resize(retry.size() - take);
    } else {
      Bump(metrics_->send_errors);
      clock_.WaitUntilMs(clock_.NowMs() + 300, std::chrono::milliseconds(300));
    }
  }
  done_threads_.fetch_add(1);
}

// ---- Canceller ----

Canceller::Canceller(JobOptions options, OrderBook* book, OrderLog* log, Clock& clock,
                     Metrics* metrics)
    : options_(std::move(options)), book_(book), log_(log), clock_(clock), metrics_(metrics) {}

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
  client::SimpleConsumer consumer(options_.client, options_.group);
  client::ReceiveOptions ro;
  ro.max_messages = options_.receive_batch;
  ro.invisible_ms = options_.invisible_ms;
  ro.long_poll_ms = 500;
  const uint64_t run_id = log_->config().run_id;
  std::vector<int64_t>& lateness = lateness_[index];
  std::vector<std::string> handles;
  while (!stop_ && !metrics_->fatal) {
    auto received = consumer.Receive(options_.topic, ro);
    const int64_t now = clock_.NowMs();
    if (!received.ok()) {
      Bump(metrics_->receive_errors);
      clock_.WaitUntilMs(now + 200, std::chrono::milliseconds(200));
      continue;
    }
    handles.clear();
    uint64_t max_seq = 0;
    for (const client::ReceivedMessage& m : *received) {
      uint64_t msg_run = 0, id = 0;
      if (!ParseTimeoutBody(m.body, &msg_run, &id) || msg_run != run_id) {
        Bump(metrics_->foreign);  // another run's message on the same topic: not ours to judge
        handles.push_back(m.receipt_handle);
        continue;
      }
      Bump(metrics_->received);
      if (m.delivery_attempt == 1) lateness.push_back(now - m.deliver_ms);
      uint64_t seq = 0;
      switch (book_->CancelIfDue(id, now, &seq)) {
        case CancelResult::kCancelled:
          Bump(metrics_->cancelled_now);
          break;
        case CancelResult::kAlreadyCancelled:
          Bump(metrics_->duplicates);
          break;
        case CancelResult::kPaid:
          Bump(metrics_->timeout_after_paid);
          break;
        case CancelResult::kNotDue:
          // Delivered before the deadline: a broker bug. Leave the order alone, ask again later.
          Bump(metrics_->early);
          (void)consumer.Nack(m.receipt_handle, book_->deadline(id) - now + 1);
          continue;
        case CancelResult::kUnknown:
          Bump(metrics_->foreign);
          break;
      }
      max_seq = std::max(max_seq, seq);
      handles.push_back(m.receipt_handle);
    }
    if (handles.empty()) continue;
    // ACK only what is durable: the cancellation we just made, or the payment/cancellation that
    // another thread recorded and may not have synced yet.
    if (max_seq > 0 && !log_->Sync(max_seq).ok()) {
      metrics_->fatal = true;
      break;
    }
    auto acked = consumer.AckBatch(handles);
    if (!acked.ok()) {
      Bump(metrics_->ack_errors, handles.size());
      continue;
    }
    for (const absl::Status& s : *acked) {
      if (!s.ok()) Bump(metrics_->ack_errors);
    }
  }
}

}  // namespace tokimq::order_timeout
