// TimerStore benchmark (not part of the test run). Prints:
//   enqueue rate  : Schedule + enqueue into TimerLog/wheel, 100 B bodies (msgs/s); then the
//                   same through ScheduleBatch in batches of --batch (0 = skip)
//   dequeue rate  : all due at once, walk + read + put into the real topic (msgs/s)
//   lateness      : p50/p99/max ms at --rate msg/s on the real clock for --seconds
//   RSS           : anonymous RSS per pending message with --pending messages scheduled
//   hot second    : --hot messages due within one second (real clock, services running, plus
//                   a trickle of 1000 msg/s in the seconds around it): time from the start of
//                   the hot second until the last one is delivered, lateness of the trickle
//                   (other ticks must not stall), lowest pending gauge seen (never negative)
// Enqueue/dequeue also print process CPU time per message (user + sys), steadier than wall
// time on a shared machine.
// Usage: timerstore_bench [--n=1000000] [--rate=100000] [--seconds=3] [--pending=2000000]
//                         [--hot=500000] [--batch=128] [--dir=/tmp/tokimq-bench]
// A section is skipped when its count is 0.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "commitlog/message_store.h"
#include "common/clock.h"
#include "timerstore/timer_store.h"

namespace {

using tokimq::Clock;
using tokimq::ManualClock;
using tokimq::Message;
using tokimq::MessageStore;
using tokimq::PhysicalOffset;
using tokimq::QueueOffset;
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

int64_t CpuMicros() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1'000'000LL + ru.ru_utime.tv_usec +
         ru.ru_stime.tv_usec;
}

int64_t PropInt(const Message& m, const char* key) {
  auto it = m.properties.find(key);
  return it == m.properties.end() ? -1 : std::atoll(it->second.c_str());
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

Message Msg(int64_t i, const char* topic = "bench") {
  Message m;
  m.topic = topic;
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
  const int64_t hot = Flag(argc, argv, "hot", 500'000);
  const int64_t batch = Flag(argc, argv, "batch", 128);
  std::string dir = "/tmp/tokimq-bench";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind("--dir=", 0) == 0) dir = argv[i] + 6;
  }
  SystemClock* wall = SystemClock::Default();

  if (n > 0) {  // Enqueue and dequeue rates on a manual clock (time stands still meanwhile).
    ManualClock clock;
    Stores s = OpenStores(dir, &clock, 1000);
    int64_t deliver = clock.NowMs() + 60'000;
    int64_t t0 = wall->NowMicros(), c0 = CpuMicros();
    for (int64_t i = 0; i < n; ++i) Check(s.ts->Schedule(Msg(i), deliver + i % 1000).status());
    Check(s.ts->RunUntilIdle());
    int64_t t1 = wall->NowMicros(), c1 = CpuMicros();
    clock.SetMs(deliver + 1000);
    Check(s.ts->RunUntilIdle());
    int64_t t2 = wall->NowMicros(), c2 = CpuMicros();
    std::printf(
        "enqueue: %lld msgs in %.2f s = %.0f msgs/s, cpu %.2f us/msg (Schedule + "
        "TimerLog/wheel)\n",
        static_cast<long long>(n), Seconds(t1 - t0), n / Seconds(t1 - t0),
        static_cast<double>(c1 - c0) / static_cast<double>(n));
    std::printf("dequeue: %lld msgs in %.2f s = %.0f msgs/s, cpu %.2f us/msg (delivered %lld)\n",
                static_cast<long long>(n), Seconds(t2 - t1), n / Seconds(t2 - t1),
                static_cast<double>(c2 - c1) / static_cast<double>(n),
                static_cast<long long>(s.ts->metrics().delivered.Value()));
  }
  if (n > 0 && batch > 0) {  // Same, through ScheduleBatch (as the broker's Send handler does).
    ManualClock clock;
    Stores s = OpenStores(dir, &clock, 1000);
    int64_t deliver = clock.NowMs() + 60'000;
    int64_t t0 = wall->NowMicros(), c0 = CpuMicros();
    for (int64_t i = 0; i < n; i += batch) {
      std::vector<tokimq::ScheduleItem> items;
      items.reserve(static_cast<size_t>(batch));
      for (int64_t j = i; j < std::min(n, i + batch); ++j) {
        items.push_back({Msg(j), deliver + j % 1000});
      }
      Check(s.ts->ScheduleBatch(std::move(items)).status());
    }
    int64_t c1 = CpuMicros();
    Check(s.ts->RunUntilIdle());
    int64_t t2 = wall->NowMicros(), c2 = CpuMicros();
    std::printf(
        "enqueue batch %lld: %lld msgs in %.2f s = %.0f msgs/s, cpu %.2f us/msg (ScheduleBatch "
        "%.2f us/msg + TimerLog/wheel %.2f us/msg)\n",
        static_cast<long long>(batch), static_cast<long long>(n), Seconds(t2 - t0),
        n / Seconds(t2 - t0), static_cast<double>(c2 - c0) / static_cast<double>(n),
        static_cast<double>(c1 - c0) / static_cast<double>(n),
        static_cast<double>(c2 - c1) / static_cast<double>(n));
  }
  if (rate > 0 &&
      seconds > 0) {  // Lateness at `rate` msg/s on the real clock, services on their threads.
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
    std::printf(
        "lateness at %lld msg/s for %lld s: delivered %lld/%lld p50=%lld ms p99=%lld ms "
        "max=%lld ms (never early: histogram floor 0)\n",
        static_cast<long long>(rate), static_cast<long long>(seconds),
        static_cast<long long>(s.ts->metrics().delivered.Value()), static_cast<long long>(total),
        static_cast<long long>(h.Percentile(0.5)), static_cast<long long>(h.Percentile(0.99)),
        static_cast<long long>(h.Max()));
  }
  if (hot > 0) {  // Hot second on the real clock.
    Stores s = OpenStores(dir, wall, 100);
    Check(s.ts->Start());
    const int64_t start = wall->NowMs();
    // Scheduling runs at roughly the enqueue rate; leave room for it (>= 50k msg/s assumed).
    const int64_t hot_start = (start + 2'000 + hot / 50) / 1000 * 1000 + 1000;
    const int64_t other_from = hot_start - 2'000, other_to = hot_start + 3'000;
    int64_t others = 0;
    for (int64_t i = 0; i < hot; ++i) {
      Check(s.ts->Schedule(Msg(i, "hot"), hot_start + i % 1000).status());
      if (i % 100 == 0) {  // 1 per ms of [other_from, other_to) over the run
        int64_t d = other_from + (others % (other_to - other_from));
        Check(s.ts->Schedule(Msg(i, "other"), d).status());
        ++others;
      }
    }
    const int64_t scheduled_at = wall->NowMs();
    int64_t min_pending = INT64_MAX;
    const int64_t total = hot + others;
    while (s.ts->metrics().delivered.Value() < total && wall->NowMs() < hot_start + 60'000) {
      min_pending = std::min(min_pending, s.ts->metrics().pending.Value());
      wall->WaitUntilMs(wall->NowMs() + 5, std::chrono::milliseconds(5));
    }
    Check(s.ts->Stop());
    int64_t last_hot = 0, worst_other = 0, early = 0, direct = 0;
    auto hot_msgs = s.ms->ReadQueue("hot", 0, QueueOffset(0), static_cast<int>(hot));
    Check(hot_msgs.status());
    for (const Message& m : *hot_msgs) {
      if (PropInt(m, tokimq::prop::kTimerDequeueMs) < 0) {  // scheduled after its due time
        ++direct;
        continue;
      }
      last_hot = std::max(last_hot, PropInt(m, tokimq::prop::kTimerDequeueMs));
      early += PropInt(m, tokimq::prop::kTimerDequeueMs) < PropInt(m, tokimq::prop::kDeliverMs);
    }
    auto other_msgs = s.ms->ReadQueue("other", 0, QueueOffset(0), static_cast<int>(others));
    Check(other_msgs.status());
    for (const Message& m : *other_msgs) {
      if (PropInt(m, tokimq::prop::kTimerDequeueMs) < 0) {
        ++direct;
        continue;
      }
      int64_t late =
          PropInt(m, tokimq::prop::kTimerDequeueMs) - PropInt(m, tokimq::prop::kDeliverMs);
      worst_other = std::max(worst_other, late);
      early += late < 0;
    }
    std::printf(
        "hot second: %lld msgs due in [%lld, +1000) ms (scheduled %lld ms before it); "
        "delivered %zu hot + %zu/%lld other; last hot delivered %lld ms after the "
        "second began; other ticks' worst lateness %lld ms; early %lld; direct %lld; min "
        "pending gauge %lld; pending now %lld (underflows %lld)\n",
        static_cast<long long>(hot), static_cast<long long>(hot_start),
        static_cast<long long>(hot_start - scheduled_at), hot_msgs->size(), other_msgs->size(),
        static_cast<long long>(others), static_cast<long long>(last_hot - hot_start),
        static_cast<long long>(worst_other), static_cast<long long>(early),
        static_cast<long long>(direct), static_cast<long long>(min_pending),
        static_cast<long long>(s.ts->metrics().pending.Value()),
        static_cast<long long>(s.ts->metrics().pending.underflows()));
  }
  if (pending > 0) {  // Anonymous RSS per pending message.
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
    std::printf(
        "RSS: %lld pending, RssAnon %lld kB -> %lld kB: %.2f B per pending message "
        "(gauge pending=%lld)\n",
        static_cast<long long>(pending), static_cast<long long>(before),
        static_cast<long long>(after),
        static_cast<double>(after - before) * 1024.0 / static_cast<double>(pending),
        static_cast<long long>(s.ts->metrics().pending.Value()));
  }
  std::filesystem::remove_all(dir);
  return 0;
}
