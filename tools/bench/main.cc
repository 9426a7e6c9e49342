// tokimq-bench: drives tokimq, a Redis sorted-set delay queue, beanstalkd or a PostgreSQL jobs
// table with one workload
// and prints what it measured, ending with one machine-readable "RESULT k=v ..." line
// that bench/compare.sh collects.
//
//   tokimq-bench --system tokimq --addr 127.0.0.1:10911 --messages 1000000 --delay uniform:1s-10s
//   tokimq-bench --system redis --addr 127.0.0.1:6379 --mode enqueue --delay fixed:2h --pid P
//   tokimq-bench --system beanstalkd --addr 127.0.0.1:11300 --mode ping --max-run 60s
//   tokimq-bench --system postgresql --addr 127.0.0.1:5432 --mode lease --delay now
//
// Modes: e2e (send and consume concurrently: enqueue rate, lateness, early count; for tokimq
// also the broker timer's release lateness over the run and, for hot:, when the hot second was
// fully released into the topic), enqueue (send only; with --pid: anonymous RSS per pending
// message), lease (send immediately-due messages, then receive + ack them all: lease rate), ping
// (wait until the system serves: restart time). --delay spread:<lead> is workload g: one message
// due per millisecond of one second; --rate paces the sends (g's background load).
// Lateness is measured at the consumer (receive time - deliver time: includes how fast the
// consumers drain the topic); release lateness is the broker timer's (put into the topic -
// deliver time), which redis, beanstalkd and postgresql do not have.
// RESULT fields that were not measured are -1: hot_drain_ms outside hot:; release_p50_ms,
// release_p99_ms, release_max_ms, released and released_topic for the peers, modes
// other than e2e and --delay now; hot_released_ms and hot_released_lo_ms also outside hot:;
// anon_b_per_msg without --pid;
// log_syncs and syncs_per_msg (the system's own count of its log fsyncs while the producers
// ran, and that per acknowledged message) for systems that do not count them (the peers).
// Exit code 0 when the run completed with no early message and no error.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "common/clock.h"
#include "proto/duration.h"
#include "runner.h"

namespace tb = tokimq::bench;

namespace {

// "uniform:1s-10s" | "hot:20s" | "spread:3s" | "fixed:2h" | "now"
bool ParseDelay(const std::string& spec, tb::Workload* w) {
  auto dur = [](const std::string& s, int64_t* ms) {
    auto r = tokimq::wire::ParseDuration(s);
    if (!r.ok()) return false;
    *ms = *r;
    return true;
  };
  if (spec == "now") {
    w->delay = tb::DelayKind::kNow;
    return true;
  }
  size_t colon = spec.find(':');
  if (colon == std::string::npos) return false;
  std::string kind = spec.substr(0, colon), arg = spec.substr(colon + 1);
  if (kind == "uniform") {
    size_t dash = arg.find('-');
    w->delay = tb::DelayKind::kUniform;
    return dash != std::string::npos && dur(arg.substr(0, dash), &w->delay_lo_ms) &&
           dur(arg.substr(dash + 1), &w->delay_hi_ms) && w->delay_hi_ms >= w->delay_lo_ms;
  }
  if (kind == "spread") {
    w->delay = tb::DelayKind::kSpread;
    return dur(arg, &w->hot_lead_ms);
  }
  if (kind == "hot") {
    w->delay = tb::DelayKind::kHot;
    return dur(arg, &w->hot_lead_ms);
  }
  if (kind == "fixed") {
    w->delay = tb::DelayKind::kFixed;
    return dur(arg, &w->delay_lo_ms);
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokimq-bench: delay-queue load generator (tokimq, redis, beanstalkd, postgresql)"};
  tb::DriverOptions d;
  tb::Workload w;
  std::string delay = "uniform:1s-10s", lease = "60s", max_run = "10m", label;
  std::string ack_mode = "with-receive";
  app.add_option("--system", d.system, "tokimq | redis | beanstalkd | postgresql")
      ->required()->check(CLI::IsMember({"tokimq", "redis", "beanstalkd", "postgresql"}));
  app.add_option("--addr", d.addr, "host:port of the system")->required();
  app.add_option("--queue", d.queue, "topic / key prefix / tube")->default_val("bench");
  app.add_option("--mode", w.mode, "e2e | enqueue | lease | ping")->default_val("e2e")
      ->check(CLI::IsMember({"e2e", "enqueue", "lease", "ping"}));
  app.add_option("--messages,-n", w.messages, "messages")->default_val(100'000);
  app.add_option("--body-size", w.body_size, "body bytes")->default_val(100)
      ->check(CLI::Range(32, 1 << 20));
  app.add_option("--delay", delay,
                 "uniform:1s-10s | hot:<lead> | spread:<lead> | fixed:<delay> | now")
      ->default_val("uniform:1s-10s");
  app.add_option("--producers", w.producers, "producer connections")->default_val(2);
  app.add_option("--consumers", w.consumers, "consumer connections")->default_val(4);
  app.add_option("--batch", w.batch, "messages per send request")->default_val(128)
      ->check(CLI::Range(1, 10'000));
  app.add_option("--pipeline", d.pipeline, "send requests in flight per producer")
      ->default_val(16)->check(CLI::Range(1, 1024));
  app.add_option("--ack", ack_mode,
                 "with-receive: a consumer acks its last batch in its next receive's round trip "
                 "(tokimq ack_receipt_handles, Redis pipelined ZREM, PostgreSQL DELETE in the "
                 "claim); separate: an Ack round trip of its own")
      ->check(CLI::IsMember({"with-receive", "separate"}))
      ->default_val("with-receive");
  app.add_option("--receive-batch", w.receive_batch, "max messages per receive")
      ->default_val(32)->check(CLI::Range(1, 1024));
  app.add_option("--lease", lease, "invisible duration / TTR")->default_val("60s");
  app.add_option("--rate", w.rate, "sends per second over all producers (0: unpaced)")
      ->default_val(0)->check(CLI::NonNegativeNumber);
  app.add_option("--max-run", max_run, "stop after this long")->default_val("10m");
  app.add_option("--pid", w.rss_pid, "process id of the system, to sample its RSS");
  app.add_option("--label", label, "workload label printed in the RESULT line");
  app.add_option("--access-key", d.access_key, "tokimq --auth: access key")
      ->envname("TOKIMQ_ACCESS_KEY");
  app.add_option("--secret-key", d.secret_key, "tokimq --auth: secret key")
      ->envname("TOKIMQ_SECRET_KEY");
  app.add_flag("--tls", d.tls, "tokimq: connect with TLS");
  app.add_option("--tls-ca", d.tls_ca_file, "tokimq --tls: PEM CA file to trust");
  CLI11_PARSE(app, argc, argv);
  w.ack_with_receive = ack_mode == "with-receive";

  if (!ParseDelay(delay, &w)) {
    std::fprintf(stderr, "tokimq-bench: bad --delay %s\n", delay.c_str());
    return 2;
  }
  auto lease_ms = tokimq::wire::ParseDuration(lease);
  auto max_run_ms = tokimq::wire::ParseDuration(max_run);
  if (!lease_ms.ok() || !max_run_ms.ok()) {
    std::fprintf(stderr, "tokimq-bench: bad --lease or --max-run\n");
    return 2;
  }
  d.lease_ms = *lease_ms;
  w.max_run_ms = *max_run_ms;
  if (label.empty()) label = w.mode;

  absl::StatusOr<std::unique_ptr<tb::Driver>> driver =
      d.system == "tokimq" ? tb::NewTokimqDriver(d)
      : d.system == "redis"      ? tb::NewRedisDriver(d)
      : d.system == "postgresql" ? tb::NewPostgresDriver(d)
                                 : tb::NewBeanstalkDriver(d);
  if (!driver.ok()) {
    std::fprintf(stderr, "tokimq-bench: %s\n", driver.status().ToString().c_str());
    return 2;
  }
  tokimq::Clock& clock = *tokimq::SystemClock::Default();

  if (w.mode == "ping") {
    const int64_t t0 = clock.NowMs();
    absl::Status s;
    while (true) {
      s = (*driver)->Ping();
      if (s.ok() || clock.NowMs() - t0 > w.max_run_ms) break;
      clock.WaitUntilMs(clock.NowMs() + 20, std::chrono::milliseconds(20));
    }
    const int64_t ms = clock.NowMs() - t0;
    std::printf("%s ready after %lld ms%s\n", d.system.c_str(), static_cast<long long>(ms),
                s.ok() ? "" : (" (gave up: " + s.ToString() + ")").c_str());
    std::printf("RESULT system=%s label=%s ready_ms=%lld ok=%d\n", d.system.c_str(), label.c_str(),
                static_cast<long long>(ms), s.ok() ? 1 : 0);
    return s.ok() ? 0 : 1;
  }

  absl::Status setup = (*driver)->Setup();
  if (!setup.ok()) {
    std::fprintf(stderr, "tokimq-bench: setup: %s\n", setup.ToString().c_str());
    return 2;
  }
  tb::Result r = tb::Run(driver->get(), w);
  (*driver)->Stop();

  std::printf("%s %s: %llu messages x %zu B, delay %s, %d producers, %d consumers\n",
              d.system.c_str(), label.c_str(), static_cast<unsigned long long>(w.messages),
              w.body_size, delay.c_str(), w.producers, w.consumers);
  std::printf("  enqueue   %llu in %.2f s = %.0f msg/s\n",
              static_cast<unsigned long long>(r.sent), r.enqueue_s, r.enqueue_rate);
  if (w.mode != "enqueue") {
    std::printf("  consume   %llu received (%llu duplicates), %.0f msg/s\n",
                static_cast<unsigned long long>(r.received),
                static_cast<unsigned long long>(r.duplicates), r.consume_rate);
    if (r.due_rate >= 0) {
      std::printf("  due       %.0f msg/s over the span of the deliver times; last received %lld ms "
                  "after the last deliver time\n",
                  r.due_rate, static_cast<long long>(r.drain_lag_ms));
    }
    std::printf("  lateness  p50 %.2f ms  p99 %.2f ms  p999 %.2f ms  max %.2f ms\n", r.p50_ms,
                r.p99_ms, r.p999_ms, r.max_ms);
    std::printf("  early     %llu%s\n", static_cast<unsigned long long>(r.early),
                r.early ? "   ERROR: messages received before their deliver time" : "");
  }
  if (r.released >= 0) {
    std::printf("  release   p50 %lld ms  p99 %lld ms  max %lld ms (broker timer: deliver time -> "
                "put into topic; %lld released, %lld into %s)\n",
                static_cast<long long>(r.release_p50_ms), static_cast<long long>(r.release_p99_ms),
                static_cast<long long>(r.release_max_ms), static_cast<long long>(r.released),
                static_cast<long long>(r.released_to_topic), d.queue.c_str());
    if (r.released != r.released_to_topic) {
      std::printf("            (the timer's figures also hold its other releases in the window, "
                  "e.g. retry copies, or lease-expiry markers of older brokers)\n");
    }
  }
  if (r.hot_drain_ms >= 0) {
    std::printf("  hot second drained %lld ms after it began\n",
                static_cast<long long>(r.hot_drain_ms));
  }
  if (r.hot_released_ms >= 0) {
    std::printf("  hot second released by %lld ms after it began (the last release: between "
                "%lld and %lld ms; bounds: topic count polled every %lld ms, last deliver time + "
                "release max, last receive)\n",
                static_cast<long long>(r.hot_released_ms),
                static_cast<long long>(r.hot_released_lo_ms),
                static_cast<long long>(r.hot_released_ms),
                static_cast<long long>(tb::kReleasePollMs));
  }
  if (!r.release_error.empty()) {
    std::printf("  release   not measured: %s\n", r.release_error.c_str());
  }
  if (w.rss_pid > 0) {
    std::printf("  rss       anon %lld -> %lld kB (max %lld kB), file max %lld kB; %.1f B anon/msg\n",
                static_cast<long long>(r.rss_anon_kb_before),
                static_cast<long long>(r.rss_anon_kb_end),
                static_cast<long long>(r.rss_anon_kb_max),
                static_cast<long long>(r.rss_file_kb_max), r.anon_bytes_per_msg);
  }
  if (r.log_syncs >= 0) {
    std::printf("  fsyncs    %lld log fsyncs while sending = %.4f per acknowledged message\n",
                static_cast<long long>(r.log_syncs), r.syncs_per_msg);
  }
  if (r.errors) {
    std::printf("  errors    %llu (first: %s)\n", static_cast<unsigned long long>(r.errors),
                r.first_error.c_str());
  }
  std::printf("RESULT system=%s label=%s messages=%llu enqueue_rate=%.0f consume_rate=%.0f "
              "p50_ms=%.2f p99_ms=%.2f p999_ms=%.2f max_ms=%.2f early=%llu hot_drain_ms=%lld "
              "release_p50_ms=%lld release_p99_ms=%lld release_max_ms=%lld released=%lld "
              "released_topic=%lld hot_released_ms=%lld hot_released_lo_ms=%lld "
              "rss_anon_kb_max=%lld rss_file_kb_max=%lld anon_b_per_msg=%.1f log_syncs=%lld "
              "syncs_per_msg=%.4f errors=%llu complete=%d due_rate=%.0f drain_lag_ms=%lld\n",
              d.system.c_str(), label.c_str(), static_cast<unsigned long long>(w.messages),
              r.enqueue_rate, r.consume_rate, r.p50_ms, r.p99_ms, r.p999_ms, r.max_ms,
              static_cast<unsigned long long>(r.early), static_cast<long long>(r.hot_drain_ms),
              static_cast<long long>(r.release_p50_ms), static_cast<long long>(r.release_p99_ms),
              static_cast<long long>(r.release_max_ms), static_cast<long long>(r.released),
              static_cast<long long>(r.released_to_topic),
              static_cast<long long>(r.hot_released_ms),
              static_cast<long long>(r.hot_released_lo_ms),
              static_cast<long long>(r.rss_anon_kb_max), static_cast<long long>(r.rss_file_kb_max),
              r.anon_bytes_per_msg, static_cast<long long>(r.log_syncs), r.syncs_per_msg,
              static_cast<unsigned long long>(r.errors), r.complete ? 1 : 0, r.due_rate,
              static_cast<long long>(r.drain_lag_ms));
  return r.complete && r.early == 0 && r.errors == 0 ? 0 : 1;
}
