// tokimq-order-timeout: the order-cancellation job on a real broker, its orders in SQLite.
//
// An order service creates N orders (rows in <state-dir>/orders.db, SQLite in WAL mode) and
// sends, for each, a delay message keyed by order id that is due at the order's payment
// deadline; a payment simulator pays a share of them before it (UNPAID -> PAID); a canceller
// consumes the due messages and, in one SQLite transaction, cancels the orders still unpaid and
// records the message ids, ACKing only after that commit (client/sqlite_process_once.h). With
// --kill-worker (the default) one extra cancel worker is a child process that kills itself with
// SIGKILL right after such a commit, before its ACK: its messages come back and must be found
// processed.
//
// At the end the database is read back and audited. Exit code 0 when every unpaid order was
// cancelled, none was cancelled after payment or before its deadline, no change was applied
// twice and the killed worker's messages were redelivered and found processed; 1 otherwise;
// 2 on a usage or setup error. --resume continues a run (e.g. after the broker or this process
// was killed) from its state dir.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>

#include "common/clock.h"
#include "common/duration.h"
#include "order_timeout/crash_worker.h"
#include "order_timeout/order_db.h"
#include "order_timeout/transactional_creator.h"
#include "order_timeout/workers.h"

namespace ot = tokimq::order_timeout;

namespace {

struct Flags {
  ot::JobOptions job;
  std::string timeout = "30m", state_dir = "./order-timeout-state", invisible = "10s";
  std::string grace = "60s", settle = "1s", sqlite_sync = "full";
  uint64_t orders = 100'000;
  double paid = 0.7;
  bool resume = false, kill_worker = true, kill_creator = true;
  int64_t timeout_ms = 0, grace_ms = 0, settle_ms = 0;
};

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tokimq-order-timeout: %s\n", msg.c_str());
  return 2;
}

void AddFlags(CLI::App& app, Flags& f) {
  // A later flag wins (scripts/demo.sh passes its defaults first, then the user's flags).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ot::JobOptions& job = f.job;
  app.add_option("--broker", job.client.broker, "broker address host:port")
      ->default_val("127.0.0.1:10911");
  app.add_option("--topic", job.topic, "delay topic for the timeout messages")
      ->default_val("orders.timeout");
  app.add_option("--group", job.group, "consumer group of the canceller")
      ->default_val("order-canceller");
  app.add_option("--orders", f.orders, "number of orders")
      ->default_val(100'000)
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  app.add_option("--timeout", f.timeout, "payment deadline after creation, e.g. 30m, 5s")
      ->default_val("30m");
  app.add_option("--paid", f.paid, "share of orders paid before the deadline (0..1)")
      ->default_val(0.7)
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--producers", job.producers, "producer connections")
      ->default_val(2)
      ->check(CLI::Range(1, 64));
  app.add_option("--consumers", job.consumers, "canceller threads (one connection each)")
      ->default_val(8)
      ->check(CLI::Range(1, 64));
  app.add_option("--batch", job.batch, "messages per send request, orders per INSERT transaction")
      ->default_val(256)
      ->check(CLI::Range(1, 4096));
  app.add_option("--window", job.window, "send requests in flight per producer")
      ->default_val(16)
      ->check(CLI::Range(1, 1024));
  app.add_option("--receive-batch", job.receive_batch, "max messages per receive")
      ->default_val(128)
      ->check(CLI::Range(1, 1024));
  app.add_option("--invisible", f.invisible, "canceller lease per received message")
      ->default_val("10s");
  app.add_option("--state-dir", f.state_dir, "directory of the SQLite database orders.db")
      ->default_val("./order-timeout-state");
  app.add_option("--sqlite-sync", f.sqlite_sync,
                 "full: fsync every commit (survives power loss); normal: WAL without fsync "
                 "per commit (survives kill -9 only)")
      ->default_val("full")
      ->check(CLI::IsMember({"full", "normal"}));
  app.add_flag("--kill-worker,!--no-kill-worker", f.kill_worker,
               "run one cancel worker as a child process killed (SIGKILL) between its SQLite "
               "commit and its ACK")
      ->default_val(true);
  app.add_flag("--transactional,!--no-transactional", f.job.transactional,
               "create orders by transactional send + INSERT + commit (a TRANSACTION topic); "
               "off: INSERT, then a plain send (a DELAY topic)")
      ->default_val(true);
  app.add_flag("--kill-creator,!--no-kill-creator", f.kill_creator,
               "with --transactional, on a fresh run: a creator child process killed (SIGKILL) "
               "after its half messages and its local commit, before any EndTransaction")
      ->default_val(true);
  app.add_flag("--resume", f.resume,
               "continue the run in --state-dir (orders/timeout/paid come from its database)");
  app.add_option("--grace", f.grace, "give up after this long without progress")
      ->default_val("60s");
  app.add_option("--settle", f.settle,
                 "after the last deadline, keep receiving this long (lateness of paid orders)")
      ->default_val("1s");
}

// Creates or opens the run's database; fills `config`.
int SetUpDatabase(const Flags& f, ot::RunConfig* config) {
  std::error_code ec;
  std::filesystem::create_directories(f.state_dir, ec);
  if (ec) return Fail("cannot create " + f.state_dir + ": " + ec.message());
  if (!f.resume) {
    if (std::filesystem::exists(f.job.db_path)) {
      return Fail(f.job.db_path + " already holds a run: pass --resume or another --state-dir");
    }
    ot::RunConfig c;
    std::random_device rd;
    c.run_id = (uint64_t{rd()} << 32) | rd();
    c.seed = (uint64_t{rd()} << 32) | rd();
    c.orders = f.orders;
    c.timeout_ms = f.timeout_ms;
    c.paid_ppm = static_cast<uint32_t>(f.paid * 1'000'000 + 0.5);
    absl::Status s = ot::OrderDb::CreateRun(f.job.db_path, c, f.job.sqlite);
    if (!s.ok()) return Fail(s.ToString());
  }
  auto db = ot::OrderDb::Open(f.job.db_path, f.job.sqlite, *tokimq::SystemClock::Default());
  if (!db.ok()) return Fail((f.resume ? "--resume: " : "") + db.status().ToString());
  *config = (*db)->config();
  return 0;
}

struct RunState {
  int64_t start_ms = 0, sent_done_ms = 0, end_ms = 0;
  bool gave_up = false;
};

// Waits until every order is paid or cancelled, the last deadline has passed (+ settle) and the
// killed worker's messages came back, or until nothing moved for --grace while work was still
// expected.
// The killed creator's orders: [config.orders, config.orders + kCreatorOrders).
constexpr uint64_t kCreatorOrders = 64;

// Whether a crash worker's consequences are all in: `settled` tells, once it exited; a worker
// still alive when all else is done never reached its planned kill: it is killed after one
// more round (its last step -> report -> SIGKILL takes microseconds).
bool CrashDone(std::optional<ot::CrashWorker>& w, int* live_rounds,
               const std::function<bool(const ot::CrashReport&)>& settled) {
  if (!w.has_value()) return true;
  if (w->Poll()) return !w->report().killed || settled(w->report());
  return ++*live_rounds >= 2;
}

RunState WaitForEnd(const Flags& f, const ot::RunConfig& config, ot::OrderDb& db,
                    const std::function<bool()>& creation_done, ot::Metrics& metrics,
                    std::optional<ot::CrashWorker>& crash, std::optional<ot::CrashWorker>& creator,
                    tokimq::Clock& clock) {
  RunState st;
  st.start_ms = clock.NowMs();
  int64_t max_deadline = 0, last_progress_ms = st.start_ms, last_print_ms = st.start_ms;
  uint64_t last_progress_sum = 0;
  int rounds_with_live_worker = 0, rounds_with_live_creator = 0;
  while (true) {
    clock.WaitUntilMs(clock.NowMs() + 250, std::chrono::milliseconds(250));
    const int64_t now = clock.NowMs();
    auto counts = db.Counts();
    if (!counts.ok()) continue;  // busy: next round
    const ot::OrderCounts& c = *counts;
    const bool sending_done = creation_done();
    if (sending_done && st.sent_done_ms == 0) {
      st.sent_done_ms = now;
      max_deadline = db.MaxDeadlineMs().value_or(0);
    }
    uint64_t progress = c.created + c.sent + c.paid + c.cancelled + metrics.received.load() +
                        metrics.duplicates.load();
    if (progress != last_progress_sum) {
      last_progress_sum = progress;
      last_progress_ms = now;
    }
    if (now - last_print_ms >= 2000) {
      last_print_ms = now;
      std::fprintf(stderr,
                   "  created %" PRIu64 " sent %" PRIu64 " paid %" PRIu64 " cancelled %" PRIu64
                   " received %" PRIu64 " errors send/recv/ack/db %" PRIu64 "/%" PRIu64 "/%" PRIu64
                   "/%" PRIu64 "\n",
                   c.created, c.sent, c.paid, c.cancelled, metrics.received.load(),
                   metrics.send_errors.load(), metrics.receive_errors.load(),
                   metrics.ack_errors.load(), metrics.db_errors.load());
    }
    if (metrics.fatal) break;
    const bool all_final = c.paid + c.cancelled == config.orders;
    const bool base_done = sending_done && all_final && now >= max_deadline + f.settle_ms;
    // The killed worker's cancels must come back as duplicates, and the killed creator's halves
    // be resolved by check-back (its inserted orders cancelled by their committed timeouts).
    bool crash_done = true;
    if (base_done) {
      crash_done = CrashDone(crash, &rounds_with_live_worker, [&](const ot::CrashReport& r) {
        return metrics.duplicates.load() >= r.applied;
      });
      crash_done &= CrashDone(creator, &rounds_with_live_creator, [&](const ot::CrashReport& r) {
        auto range = db.RangeCounts(config.orders, config.orders + kCreatorOrders);
        return range.ok() && range->cancelled >= r.held &&
               metrics.checks_rollback.load() >= r.applied - r.held;
      });
    }
    if (base_done && crash_done) break;
    const bool waiting_for_deadlines = sending_done && now < max_deadline;
    if (!waiting_for_deadlines && now - last_progress_ms > f.grace_ms) {
      st.gave_up = true;
      break;
    }
  }
  return st;
}

// Forks the crash workers the flags ask for (crash_worker.h). Call before any thread starts.
int StartCrashWorkers(const Flags& f, const ot::RunConfig& config,
                      std::optional<ot::CrashWorker>* crash,
                      std::optional<ot::CrashWorker>* creator) {
  if (f.kill_worker) {
    const int64_t lease_ms = std::min<int64_t>(f.job.invisible_ms, 1'000);
    auto started = ot::CrashWorker::StartCanceller(f.job, lease_ms, config.timeout_ms + f.grace_ms);
    if (!started.ok()) return Fail(started.status().ToString());
    crash->emplace(std::move(*started));
  }
  if (f.kill_creator && f.job.transactional && !f.resume) {
    auto started = ot::CrashWorker::StartCreator(f.job, config, config.orders, kCreatorOrders);
    if (!started.ok()) return Fail(started.status().ToString());
    creator->emplace(std::move(*started));
  }
  return 0;
}

struct Outcome {
  ot::OrderAudit audit;
  ot::OrderCounts creator_range;  // the killed creator's ids
  std::optional<ot::CrashReport> worker, creator;
  std::vector<int64_t> lateness;
};

// Prints the end-of-run report; true when every check holds.
bool Report(const Flags& f, const ot::RunConfig& config, const RunState& st, const Outcome& o,
            const ot::Metrics& m) {
  const ot::OrderAudit& a = o.audit;
  const double send_s =
      st.sent_done_ms > st.start_ms ? (st.sent_done_ms - st.start_ms) / 1000.0 : 0.0;
  std::printf("orders              %10" PRIu64 "\n", config.orders);
  std::printf("paid                %10" PRIu64 "\n", a.paid);
  std::printf("cancelled           %10" PRIu64 "\n", a.cancelled);
  std::printf("cancelled-but-paid  %10" PRIu64 "   (must be 0)\n", a.both);
  std::printf("missed              %10" PRIu64 "   (must be 0: unpaid and not cancelled)\n",
              a.missed);
  std::printf("cancelled-early     %10" PRIu64 "   (must be 0: before the deadline)\n",
              a.cancelled_early);
  std::printf("early deliveries    %10" PRIu64 "   (must be 0)\n", m.early.load());
  std::printf("duplicates applied  %10" PRIu64
              "   (must be 0: a message id or an order changed twice in SQLite)\n",
              a.duplicates_applied);
  std::printf("orphan timeouts     %10" PRIu64
              "   (must be 0: a committed timeout of an order that does not exist)\n",
              m.orphan_timeouts.load());
  bool crash_ok = true;
  if (o.worker.has_value()) {
    // Not killed: no cancel reached it (e.g. --paid 1); nothing to check then.
    crash_ok = !o.worker->killed || m.duplicates.load() >= o.worker->applied;
    std::printf("killed worker       %s: %" PRIu64 " cancels committed, %" PRIu64
                " messages not ACKed; redelivered and found processed here: %" PRIu64
                " (must be >= %" PRIu64 ")\n",
                o.worker->how.c_str(), o.worker->applied, o.worker->held, m.duplicates.load(),
                o.worker->applied);
  }
  if (o.creator.has_value()) {
    // An order exists iff its timeout message was committed: the inserted ones exist and were
    // cancelled by their (committed) timeout; the others do not exist, no timeout came for them
    // (orphan timeouts 0) and the checker rolled their halves back.
    const ot::CrashReport& c = *o.creator;
    const uint64_t rolled_back_needed = c.applied - c.held;
    const bool ok = c.killed && o.creator_range.created == c.held &&
                    o.creator_range.cancelled == c.held &&
                    m.checks_rollback.load() >= rolled_back_needed;
    crash_ok = crash_ok && ok;
    std::printf("killed creator      %s: %" PRIu64 " halves, %" PRIu64
                " orders inserted; exist %" PRIu64 ", cancelled by their committed timeout %" PRIu64
                " (must be %" PRIu64 "); check-back answers commit %" PRIu64 ", rollback %" PRIu64
                " (must be >= %" PRIu64 "), unknown %" PRIu64 "\n",
                c.how.c_str(), c.applied, c.held, o.creator_range.created,
                o.creator_range.cancelled, c.held, m.checks_commit.load(), m.checks_rollback.load(),
                rolled_back_needed, m.checks_unknown.load());
  }
  const std::vector<int64_t>& late = o.lateness;
  std::printf("lateness ms         p50 %" PRId64 "  p99 %" PRId64 "  max %" PRId64
              "   (receive - deliver time, %zu first deliveries)\n",
              Percentile(late, 0.50), Percentile(late, 0.99),
              late.empty() ? int64_t{0} : late.back(), late.size());
  std::printf("this process        %s %" PRIu64 " in %.2f s (%.0f msg/s), paid %" PRIu64
              ", cancelled %" PRIu64 ", timeouts of paid orders %" PRIu64
              ", redeliveries found processed %" PRIu64 " (not applied again)"
              ", already cancelled %" PRIu64 ", foreign %" PRIu64 "\n",
              f.job.transactional ? "created+committed" : "sent", m.sent.load(), send_s,
              send_s > 0 ? m.sent.load() / send_s : 0.0, m.paid_now.load(), m.cancelled_now.load(),
              m.timeout_after_paid.load(), m.duplicates.load(), m.already_cancelled.load(),
              m.foreign.load());
  {
    // The summary's "cancelled" counts orders [0, orders) in SQLite; this process's count also
    // holds the killed creator's range and lacks the killed worker's commits: say so, so the
    // two figures can be checked against each other.
    const uint64_t worker_applied = o.worker.has_value() ? o.worker->applied : 0;
    const uint64_t creator_cancelled = o.creator.has_value() ? o.creator_range.cancelled : 0;
    const int64_t expected = static_cast<int64_t>(a.cancelled) -
                             static_cast<int64_t>(worker_applied) +
                             static_cast<int64_t>(creator_cancelled);
    std::printf("cancels accounted   this process %" PRIu64 " = cancelled %" PRIu64
                " - killed worker's %" PRIu64 " + killed creator's range %" PRIu64 ": %s\n",
                m.cancelled_now.load(), a.cancelled, worker_applied, creator_cancelled,
                expected == static_cast<int64_t>(m.cancelled_now.load()) ? "yes" : "NO (see log)");
  }
  std::printf("errors              send %" PRIu64 ", end-transaction %" PRIu64 ", receive %" PRIu64
              ", ack %" PRIu64 ", sqlite %" PRIu64 ", payments refused %" PRIu64 "; %.1f s total\n",
              m.send_errors.load(), m.tx_end_errors.load(), m.receive_errors.load(),
              m.ack_errors.load(), m.db_errors.load(), m.pay_refused.load(),
              (st.end_ms - st.start_ms) / 1000.0);
  const bool ok = a.both == 0 && a.missed == 0 && a.cancelled_early == 0 &&
                  a.duplicates_applied == 0 && m.orphan_timeouts.load() == 0 &&
                  m.early.load() == 0 && !m.fatal && crash_ok;
  if (m.fatal) std::printf("FAILED: the SQLite database could not be used\n");
  if (st.gave_up) std::printf("gave up: no progress for %s\n", f.grace.c_str());
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokimq-order-timeout: cancel unpaid orders with delay messages"};
  Flags f;
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);

  auto timeout_ms = tokimq::ParseDuration(f.timeout);
  auto invisible_ms = tokimq::ParseDuration(f.invisible);
  auto grace_ms = tokimq::ParseDuration(f.grace);
  auto settle_ms = tokimq::ParseDuration(f.settle);
  if (!timeout_ms.ok() || *timeout_ms <= 0) return Fail("bad --timeout " + f.timeout);
  if (!invisible_ms.ok() || *invisible_ms <= 0) return Fail("bad --invisible " + f.invisible);
  if (!grace_ms.ok() || *grace_ms <= 0) return Fail("bad --grace " + f.grace);
  if (!settle_ms.ok()) return Fail("bad --settle " + f.settle);
  f.timeout_ms = *timeout_ms;
  f.grace_ms = *grace_ms;
  f.settle_ms = *settle_ms;
  f.job.invisible_ms = *invisible_ms;
  f.job.db_path = f.state_dir + "/orders.db";
  f.job.sqlite.synchronous_full = f.sqlite_sync == "full";

  tokimq::Clock& clock = *tokimq::SystemClock::Default();
  ot::RunConfig config;
  if (int rc = SetUpDatabase(f, &config); rc != 0) return rc;
  auto db = ot::OrderDb::Open(f.job.db_path, f.job.sqlite, clock);
  if (!db.ok()) return Fail(db.status().ToString());
  auto start_counts = (*db)->Counts();
  auto unpaid = (*db)->Unpaid(/*unsent_only=*/false);
  auto unsent = (*db)->Unpaid(/*unsent_only=*/true);
  if (!start_counts.ok() || !unpaid.ok() || !unsent.ok()) return Fail("cannot read orders.db");
  std::printf("order-timeout run %016" PRIx64 ": %" PRIu64
              " orders, timeout %s, paid %.1f %%, "
              "broker %s, topic %s, SQLite %s (WAL, synchronous=%s)%s\n",
              config.run_id, config.orders, tokimq::FormatDuration(config.timeout_ms).c_str(),
              config.paid_ppm / 10'000.0, f.job.client.broker.c_str(), f.job.topic.c_str(),
              f.job.db_path.c_str(), f.sqlite_sync.c_str(), f.resume ? " (resumed)" : "");
  if (f.resume) {
    std::printf("resumed state: created %" PRIu64 ", sent %" PRIu64 ", paid %" PRIu64
                ", cancelled %" PRIu64 "\n",
                start_counts->created, start_counts->sent, start_counts->paid,
                start_counts->cancelled);
  }
  std::fflush(stdout);

  // Before any thread exists: the child of fork() has only the calling thread.
  std::optional<ot::CrashWorker> crash, creator;
  if (int rc = StartCrashWorkers(f, config, &crash, &creator); rc != 0) return rc;
  // The creator child's local transactions must not wait behind this process's writers (SQLite
  // lets another process's writer poll and lose for seconds): start them once it is dead.
  for (int i = 0; creator.has_value() && !creator->Poll() && i < 3000; ++i) {
    clock.WaitUntilMs(clock.NowMs() + 10, std::chrono::milliseconds(10));
  }

  ot::Metrics metrics;
  ot::PaymentSimulator payer(f.job, config, clock, &metrics);
  for (const auto& [id, deadline] : *unpaid) payer.Schedule(id, deadline);  // --resume
  ot::Canceller canceller(f.job, config, clock, &metrics);
  // --resume without transactions: re-send what may never have been stored. With them, the
  // check-back resolves an earlier process's open halves from SQLite.
  std::optional<ot::OrderService> service;
  std::optional<ot::TransactionalCreator> tx_creator;
  if (f.job.transactional) {
    tx_creator.emplace(f.job, config, &payer, clock, &metrics);
  } else {
    service.emplace(f.job, config, &payer, clock, &metrics, std::move(*unsent));
  }
  payer.Start();
  canceller.Start();
  tx_creator.has_value() ? tx_creator->Start() : service->Start();
  RunState st = WaitForEnd(
      f, config, **db,
      [&] { return tx_creator.has_value() ? tx_creator->done() : service->done(); }, metrics, crash,
      creator, clock);
  tx_creator.has_value() ? tx_creator->Stop() : service->Stop();
  canceller.Stop();
  payer.Stop();
  st.end_ms = clock.NowMs();
  Outcome out;
  if (crash.has_value()) out.worker = crash->Finish();
  if (creator.has_value()) out.creator = creator->Finish();
  auto audit = (*db)->Audit();  // what the database holds on disk
  if (!audit.ok()) return Fail("audit: " + audit.status().ToString());
  auto range = (*db)->RangeCounts(config.orders, config.orders + kCreatorOrders);
  if (!range.ok()) return Fail("audit: " + range.status().ToString());
  out.audit = *audit;
  out.creator_range = *range;
  out.lateness = canceller.TakeLateness();
  std::sort(out.lateness.begin(), out.lateness.end());
  tx_creator.reset();  // its checker stops before the report
  return Report(f, config, st, out, metrics) ? 0 : 1;
}
