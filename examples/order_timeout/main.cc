// tokimq-order-timeout: the order-cancellation job on a real broker.
//
// An order service creates N orders and sends, for each, a delay message keyed by order id that
// is due at the order's payment deadline; a payment simulator pays a share of them before it; a
// canceller consumes the due messages and cancels the orders still unpaid, ACKing only after the
// cancellation is durable in the example's own order log (<state-dir>/orders.log).
//
// At the end the order log is read back from disk and audited. Exit code 0 when every unpaid
// order was cancelled, none was cancelled after payment or before its deadline; 1 otherwise;
// 2 on a usage or setup error. --resume continues a run (e.g. after the broker or this process
// was killed) from its state dir.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>

#include "common/clock.h"
#include "common/file.h"
#include "order_timeout/order_book.h"
#include "order_timeout/order_log.h"
#include "order_timeout/workers.h"
#include "proto/duration.h"

namespace ot = tokimq::order_timeout;

namespace {

struct Audit {
  uint64_t created = 0, paid = 0, cancelled = 0, both = 0, missed = 0, cancelled_early = 0;
};

// Reads the order log back from disk: what the run really made durable.
absl::StatusOr<Audit> AuditLog(const std::string& path) {
  std::vector<uint8_t> flags;  // bit 0 created, 1 paid, 2 cancelled
  std::vector<int64_t> deadline;
  Audit a;
  auto config = ot::OrderLog::Scan(tokimq::FileSystem::Default(), path, nullptr);
  if (!config.ok()) return config.status();
  flags.assign(config->orders, 0);
  deadline.assign(config->orders, 0);
  auto again = ot::OrderLog::Scan(tokimq::FileSystem::Default(), path,
                                  [&](const ot::OrderRecord& r) {
    uint8_t& f = flags[r.order_id];
    if (r.event == ot::OrderEvent::kCreated && !(f & 1)) deadline[r.order_id] = r.time_ms;
    if (r.event == ot::OrderEvent::kCreated) f |= 1;
    if (r.event == ot::OrderEvent::kPaid) f |= 2;
    if (r.event == ot::OrderEvent::kCancelled) {
      f |= 4;
      if (r.time_ms < deadline[r.order_id]) ++a.cancelled_early;
    }
  });
  if (!again.ok()) return again.status();
  for (uint8_t f : flags) {
    if (f & 1) ++a.created;
    if (f & 2) ++a.paid;
    if (f & 4) ++a.cancelled;
    if ((f & 6) == 6) ++a.both;
    if (!(f & 6)) ++a.missed;  // neither paid nor cancelled (or never created)
  }
  return a;
}

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tokimq-order-timeout: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokimq-order-timeout: cancel unpaid orders with delay messages"};
  // A later flag wins (scripts/demo.sh passes its defaults first, then the user's flags).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ot::JobOptions job;
  std::string timeout = "30m", state_dir = "./order-timeout-state", invisible = "10s";
  std::string grace = "60s", settle = "1s";
  uint64_t orders = 100'000;
  double paid = 0.7;
  bool resume = false;
  app.add_option("--broker", job.client.broker, "broker address host:port")
      ->default_val("127.0.0.1:10911");
  app.add_option("--topic", job.topic, "delay topic for the timeout messages")
      ->default_val("orders.timeout");
  app.add_option("--group", job.group, "consumer group of the canceller")
      ->default_val("order-canceller");
  app.add_option("--orders", orders, "number of orders")->default_val(100'000)
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  app.add_option("--timeout", timeout, "payment deadline after creation, e.g. 30m, 5s")
      ->default_val("30m");
  app.add_option("--paid", paid, "share of orders paid before the deadline (0..1)")
      ->default_val(0.7)->check(CLI::Range(0.0, 1.0));
  app.add_option("--producers", job.producers, "producer connections")->default_val(2)
      ->check(CLI::Range(1, 64));
  app.add_option("--consumers", job.consumers, "canceller threads (one connection each)")
      ->default_val(8)->check(CLI::Range(1, 64));
  app.add_option("--batch", job.batch, "messages per send request")->default_val(256)
      ->check(CLI::Range(1, 4096));
  app.add_option("--window", job.window, "send requests in flight per producer")
      ->default_val(16)->check(CLI::Range(1, 1024));
  app.add_option("--receive-batch", job.receive_batch, "max messages per receive")
      ->default_val(128)->check(CLI::Range(1, 1024));
  app.add_option("--invisible", invisible, "canceller lease per received message")
      ->default_val("10s");
  app.add_option("--state-dir", state_dir, "directory of the order log")
      ->default_val("./order-timeout-state");
  app.add_flag("--resume", resume,
               "continue the run in --state-dir (orders/timeout/paid come from its log)");
  app.add_option("--grace", grace, "give up after this long without progress")
      ->default_val("60s");
  app.add_option("--settle", settle,
                 "after the last deadline, keep receiving this long (lateness of paid orders)")
      ->default_val("1s");
  CLI11_PARSE(app, argc, argv);

  auto timeout_ms = tokimq::wire::ParseDuration(timeout);
  auto invisible_ms = tokimq::wire::ParseDuration(invisible);
  auto grace_ms = tokimq::wire::ParseDuration(grace);
  auto settle_ms = tokimq::wire::ParseDuration(settle);
  if (!timeout_ms.ok() || *timeout_ms <= 0) return Fail("bad --timeout " + timeout);
  if (!invisible_ms.ok() || *invisible_ms <= 0) return Fail("bad --invisible " + invisible);
  if (!grace_ms.ok() || *grace_ms <= 0) return Fail("bad --grace " + grace);
  if (!settle_ms.ok()) return Fail("bad --settle " + settle);
  job.invisible_ms = *invisible_ms;

  tokimq::Clock& clock = *tokimq::SystemClock::Default();
  tokimq::FileSystem* fs = tokimq::FileSystem::Default();
  const std::string log_path = state_dir + "/orders.log";

  // Open or create the order log; recovery replays it into the book.
  std::unique_ptr<ot::OrderLog> log;
  std::unique_ptr<ot::OrderBook> book;
  if (resume) {
    auto config = ot::OrderLog::Scan(fs, log_path, nullptr);
    if (!config.ok()) return Fail("--resume: " + config.status().ToString());
    book = std::make_unique<ot::OrderBook>(config->orders, nullptr);
    auto opened = ot::OrderLog::Open(fs, log_path, [&](const ot::OrderRecord& r) {
      book->Replay(r);
    });
    if (!opened.ok()) return Fail(opened.status().ToString());
    log = std::move(*opened);
  } else {
    if (fs->Exists(log_path)) {
      return Fail(log_path + " already holds a run: pass --resume or another --state-dir");
    }
    ot::RunConfig config;
    std::random_device rd;
    config.run_id = (uint64_t{rd()} << 32) | rd();
    config.seed = (uint64_t{rd()} << 32) | rd();
    config.orders = orders;
    config.timeout_ms = *timeout_ms;
    config.paid_ppm = static_cast<uint32_t>(paid * 1'000'000 + 0.5);
    auto created = ot::OrderLog::Create(fs, log_path, config);
    if (!created.ok()) return Fail(created.status().ToString());
    log = std::move(*created);
    book = std::make_unique<ot::OrderBook>(config.orders, nullptr);
  }
  book->AttachLog(log.get());
  const ot::RunConfig config = log->config();  // a copy: used after the log is closed
  ot::BookCounts start_counts = book->counts();
  std::printf("order-timeout run %016" PRIx64 ": %" PRIu64 " orders, timeout %s, paid %.1f %%, "
              "broker %s, topic %s%s\n",
              config.run_id, config.orders, tokimq::wire::FormatDuration(config.timeout_ms).c_str(),
              config.paid_ppm / 10'000.0, job.client.broker.c_str(), job.topic.c_str(),
              resume ? " (resumed)" : "");
  if (resume) {
    std::printf("resumed state: created %" PRIu64 ", sent %" PRIu64 ", paid %" PRIu64
                ", cancelled %" PRIu64 "\n",
                start_counts.created, start_counts.sent, start_counts.paid,
                start_counts.cancelled);
  }
  std::fflush(stdout);

  ot::Metrics metrics;
  ot::PaymentSimulator payer(book.get(), log.get(), clock, &metrics);
  for (uint64_t id = 0; id < config.orders; ++id) {  // --resume: payments still to come
    if (book->state(id) == ot::OrderState::kCreated) payer.Schedule(id, book->deadline(id));
  }
  ot::Canceller canceller(job, book.get(), log.get(), clock, &metrics);
  ot::OrderService service(job, book.get(), log.get(), &payer, clock, &metrics);
  const int64_t start_ms = clock.NowMs();
  payer.Start();
  canceller.Start();
  service.Start();

  // Wait until every order is paid or cancelled and the last deadline has passed (+ settle), or
  // until nothing moved for --grace while work was still expected.
  int64_t sent_done_ms = 0, max_deadline = 0, last_progress_ms = start_ms, last_print_ms = start_ms;
  uint64_t last_progress_sum = 0;
  bool gave_up = false;
  while (true) {
    clock.WaitUntilMs(clock.NowMs() + 50, std::chrono::milliseconds(50));
    const int64_t now = clock.NowMs();
    ot::BookCounts c = book->counts();
    const bool sending_done = service.done();
    if (sending_done && sent_done_ms == 0) {
      sent_done_ms = now;
      for (uint64_t id = 0; id < config.orders; ++id) {
        max_deadline = std::max(max_deadline, book->deadline(id));
      }
    }
    uint64_t progress = c.created + c.sent + c.paid + c.cancelled + metrics.received.load();
    if (progress != last_progress_sum) {
      last_progress_sum = progress;
      last_progress_ms = now;
    }
    if (now - last_print_ms >= 2000) {
      last_print_ms = now;
      std::fprintf(stderr,
                   "  created %" PRIu64 " sent %" PRIu64 " paid %" PRIu64 " cancelled %" PRIu64
                   " received %" PRIu64 " errors send/recv/ack %" PRIu64 "/%" PRIu64 "/%" PRIu64
                   "\n",
                   c.created, c.sent, c.paid, c.cancelled, metrics.received.load(),
                   metrics.send_errors.load(), metrics.receive_errors.load(),
                   metrics.ack_errors.load());
    }
    if (metrics.fatal) break;
    const bool all_final = c.paid + c.cancelled == config.orders;
    if (sending_done && all_final && now >= max_deadline + *settle_ms) break;
    const bool waiting_for_deadlines = sending_done && now < max_deadline;
    if (!waiting_for_deadlines && now - last_progress_ms > *grace_ms) {
      gave_up = true;
      break;
    }
  }
  service.Stop();
  canceller.Stop();
  payer.Stop();
  absl::Status synced = log->SyncAll();
  const int64_t end_ms = clock.NowMs();
  log.reset();  // syncs and closes

  auto audit = AuditLog(log_path);
  if (!audit.ok()) return Fail("audit: " + audit.status().ToString());
  std::vector<int64_t> lateness = canceller.TakeLateness();
  std::sort(lateness.begin(), lateness.end());

  const double send_s = sent_done_ms > start_ms ? (sent_done_ms - start_ms) / 1000.0 : 0.0;
  std::printf("orders              %10" PRIu64 "\n", config.orders);
  std::printf("paid                %10" PRIu64 "\n", audit->paid);
  std::printf("cancelled           %10" PRIu64 "\n", audit->cancelled);
  std::printf("cancelled-but-paid  %10" PRIu64 "   (must be 0)\n", audit->both);
  std::printf("missed              %10" PRIu64 "   (must be 0: unpaid and not cancelled)\n",
              audit->missed);
  std::printf("cancelled-early     %10" PRIu64 "   (must be 0: before the deadline)\n",
              audit->cancelled_early);
  std::printf("early deliveries    %10" PRIu64 "   (must be 0)\n", metrics.early.load());
  std::printf("lateness ms         p50 %" PRId64 "  p99 %" PRId64 "  max %" PRId64
              "   (receive - deliver time, %zu first deliveries)\n",
              Percentile(lateness, 0.50), Percentile(lateness, 0.99),
              lateness.empty() ? int64_t{0} : lateness.back(), lateness.size());
  std::printf("this process        sent %" PRIu64 " in %.2f s (%.0f msg/s), paid %" PRIu64
              ", cancelled %" PRIu64 ", timeouts of paid orders %" PRIu64
              ", duplicates %" PRIu64 ", foreign %" PRIu64 "\n",
              metrics.sent.load(), send_s, send_s > 0 ? metrics.sent.load() / send_s : 0.0,
              metrics.paid_now.load(), metrics.cancelled_now.load(),
              metrics.timeout_after_paid.load(), metrics.duplicates.load(),
              metrics.foreign.load());
  std::printf("errors              send %" PRIu64 ", receive %" PRIu64 ", ack %" PRIu64
              ", payments refused %" PRIu64 ", payment window missed %" PRIu64 "; %.1f s total\n",
              metrics.send_errors.load(), metrics.receive_errors.load(),
              metrics.ack_errors.load(), metrics.pay_refused.load(),
              metrics.pay_window_missed.load(), (end_ms - start_ms) / 1000.0);
  bool ok = audit->both == 0 && audit->missed == 0 && audit->cancelled_early == 0 &&
            metrics.early.load() == 0 && !metrics.fatal && synced.ok();
  if (metrics.fatal || !synced.ok()) std::printf("FAILED: the order log could not be synced\n");
  if (gave_up) std::printf("gave up: no progress for %s\n", grace.c_str());
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
