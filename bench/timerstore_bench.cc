// TimerStore benchmark (not part of the test run). Prints:
//   enqueue rate  : Schedule + enqueue into TimerLog/wheel, 100 B bodies (msgs/s)
//   dequeue rate  : all due at once, walk + read + put into the real topic (msgs/s)
//   lateness      : p50/p99/max ms at --rate msg/s on the real clock for --seconds
//   RSS           : anonymous RSS per pending message with --pending messages scheduled
// Usage: timerstore_bench [--n=1000000] [--rate=100000] [--seconds=3] [--pending=2000000]
//                         [--dir=/tmp/tokimq-bench]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "commitlog/message_store.h"
#include "common/clock.h"
#include "timerstore/timer_store.h"

namespace {

using tokimq::Clock;
using tokimq::ManualClock;
using tokimq::Message;
using tokimq::MessageStore;
using tokimq::SystemClock;
using tokimq::TimerStore;

int64_t Flag(int argc, char** argv, const char* name, int64_t def) {
  std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind(prefix, 0) == 0) return std::atoll(argv[i] + prefix.size());
  }
  return def;
}

int64_t RssAnonKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::atoll(line.c_str() + 8);
  }
  return -1;
}

double Seconds(int64_t us) { return static_cast<double>(us) / 1e6; }

struct Stores {
  std::unique_ptr<MessageStore> ms;
  std::unique_ptr<TimerStore> ts;
};

Stores OpenStores(const std::string& dir, Clock* clock, int64_t precision) {
  std::filesystem::remove_all(dir);
  tokimq::MessageStoreOptions mo;
  mo.dir = dir + "/store";
  mo.commitlog.flush_mode = tokimq::FlushMode::kAsync;
  mo.commitlog.async_flush_interval_ms = 0;
  auto ms = MessageStore::Open(tokimq::FileSystem::Default(), clock, mo);
  if (!ms.ok()) {
    std::fprintf(stderr, "open store: %s\n", ms.status().ToString().c_str());
    std::exit(1);
  }
  tokimq::TimerStoreOptions to;
  to.dir = dir + "/timer";
  to.precision_ms = precision;
  to.window_ms = 2LL * 24 * 3600 * 1000;
  auto ts = TimerStore::Open(tokimq::FileSystem::Default(), clock, ms->get(), to);
  if (!ts.ok()) {
    std::fprintf(stderr, "open timer: %s\n", ts.status().ToString().c_str());
    std::exit(1);
  }
  return {std::move(*ms), std::move(*ts)};
}

Message Msg(int64_t i) {
  Message m;
  m.topic = "bench";
  m.body = std::string(100, static_cast<char>('a' + i % 26));
  m.properties[tokimq::prop::kMessageId] = std::to_string(i);
  return m;
}

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = Flag(argc, argv, "n", 1'000'000);
  const int64_t rate = Flag(argc, argv, "rate", 100'000);
  const int64_t seconds = Flag(argc, argv, "seconds", 3);
  const int64_t pending = Flag(argc, argv, "pending", 2'000'000);
  std::string dir = "/tmp/tokimq-bench";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind("--dir=", 0) == 0) dir = argv[i] + 6;
  }
  SystemClock* wall = SystemClock::Default();

  {  // Enqueue and dequeue rates on a manual clock (time stands still while we measure).
    ManualClock clock;
    Stores s = OpenStores(dir, &clock, 1000);
    int64_t deliver = clock.NowMs() + 60'000;
    int64_t t0 = wall->NowMicros();
    for (int64_t i = 0; i < n; ++i) Check(s.ts->Schedule(Msg(i), deliver + i % 1000).status());
    Check(s.ts->RunUntilIdle());
    int64_t t1 = wall->NowMicros();
    clock.SetMs(deliver + 1000);
    Check(s.ts->RunUntilIdle());
    int64_t t2 = wall->NowMicros();
    std::printf("enqueue: %lld msgs in %.2f s = %.0f msgs/s (Schedule + TimerLog/wheel)\n",
                static_cast<long long>(n), Seconds(t1 - t0), n / Seconds(t1 - t0));
    std::printf("dequeue: %lld msgs in %.2f s = %.0f msgs/s (delivered %lld)\n",
                static_cast<long long>(n), Seconds(t2 - t1), n / Seconds(t2 - t1),
                static_cast<long long>(s.ts->metrics().delivered.Value()));
  }
  {  // Lateness at `rate` msg/s on the real clock, services on their threads.
    Stores s = OpenStores(dir, wall, 100);
    Check(s.ts->Start());
    int64_t total = rate * seconds;
    int64_t start = wall->NowMs();
    for (int64_t i = 0; i < total; ++i) {
      int64_t due_send = start + i * 1000 / rate;
      while (wall->NowMs() < due_send) wall->WaitUntilMs(due_send, std::chrono::milliseconds(1));
      Check(s.ts->Schedule(Msg(i), wall->NowMs() + 200 + i % 800).status());
    }
    while (s.ts->metrics().delivered.Value() < total &&
           wall->NowMs() < start + (seconds + 30) * 1000) {
      wall->WaitUntilMs(wall->NowMs() + 10, std::chrono::milliseconds(10));
    }
    Check(s.ts->Stop());
    auto& h = s.ts->metrics().lateness_ms;
    std::printf("lateness at %lld msg/s for %lld s: delivered %lld/%lld p50=%lld ms p99=%lld ms "
                "max=%lld ms (never early: histogram floor 0)\n",
                static_cast<long long>(rate), static_cast<long long>(seconds),
                static_cast<long long>(s.ts->metrics().delivered.Value()),
                static_cast<long long>(total), static_cast<long long>(h.Percentile(0.5)),
                static_cast<long long>(h.Percentile(0.99)), static_cast<long long>(h.Max()));
  }
  {  // Anonymous RSS per pending message.
    ManualClock clock;
    Stores s = OpenStores(dir, &clock, 1000);
    Check(s.ts->RunUntilIdle());
    int64_t before = RssAnonKb();
    int64_t base = clock.NowMs() + 3'600'000;
    for (int64_t i = 0; i < pending; ++i) {
      Check(s.ts->Schedule(Msg(i), base + (i * 7919) % 86'400'000).status());
      if (i % 100'000 == 0) Check(s.ts->RunUntilIdle());
    }
    Check(s.ts->RunUntilIdle());
    int64_t after = RssAnonKb();
    std::printf("RSS: %lld pending, RssAnon %lld kB -> %lld kB: %.2f B per pending message "
                "(gauge pending=%lld)\n",
                static_cast<long long>(pending), static_cast<long long>(before),
                static_cast<long long>(after),
                static_cast<double>(after - before) * 1024.0 / static_cast<double>(pending),
                static_cast<long long>(s.ts->metrics().pending.Value()));
  }
  std::filesystem::remove_all(dir);
  return 0;
}
