// Retention churn benchmark (issue 24; not part of the test run). A MessageStore + TimerStore
// on a ManualClock: every round (--round_min of broker time) ScheduleBatch sends --per_round
// messages of 100 B in batches of 500, --delayed_pct percent of them delayed --delay_days, the
// rest due at once (straight to their topic); then the timer services run, the clock moves on
// and one retention pass (MessageStore::DeleteExpired, --retention_min) starts on a second
// thread, running while the next round is sent (as the broker's retention task does).
// Prints per simulated hour: CommitLog bytes stored (max - min offset, what retention keeps on
// disk) and bytes written in total (max offset: the copies a move writes are the difference
// between two binaries on the same workload); at the end the send rate (messages/s over the
// ScheduleBatch calls only, wall time and process CPU) and the time spent in retention passes.
// Uses only APIs that predate the retention mover, so the same source builds the old binary:
// bench/retention_churn.sh alternates both.
// Usage: retention_churn_bench [--rounds=144] [--per_round=20000] [--delayed_pct=1]
//                              [--delay_days=30] [--round_min=10] [--retention_min=60]
//                              [--segment_mb=16] [--dir=/tmp/tokimq-retention-bench]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "commitlog/message_store.h"
#include "common/clock.h"
#include "timerstore/timer_store.h"

namespace {

using tokimq::ManualClock;
using tokimq::Message;
using tokimq::MessageStore;
using tokimq::PhysicalOffset;
using tokimq::QueueOffset;
using tokimq::ScheduleItem;
using tokimq::TimerStore;

int64_t Flag(int argc, char** argv, const char* name, int64_t def) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind(prefix, 0) == 0) return std::stoll(a.substr(prefix.size()));
  }
  return def;
}

std::string StrFlag(int argc, char** argv, const char* name, const std::string& def) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
  }
  return def;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rounds = Flag(argc, argv, "rounds", 144);
  const int64_t per_round = Flag(argc, argv, "per_round", 20'000);
  const int64_t delayed_pct = Flag(argc, argv, "delayed_pct", 1);
  const int64_t delay_ms = Flag(argc, argv, "delay_days", 30) * 86'400'000;
  const int64_t round_ms = Flag(argc, argv, "round_min", 10) * 60'000;
  const int64_t retention_ms = Flag(argc, argv, "retention_min", 60) * 60'000;
  const uint64_t segment = static_cast<uint64_t>(Flag(argc, argv, "segment_mb", 16)) << 20;
  const std::string dir = StrFlag(argc, argv, "dir", "/tmp/tokimq-retention-bench");
  std::filesystem::remove_all(dir);

  ManualClock clock(1'700'000'000'000);
  tokimq::MessageStoreOptions mo;
  mo.dir = dir + "/store";
  mo.commitlog.segment_size = segment;
  mo.commitlog.async_flush_interval_ms = 0;
  mo.checkpoint_interval_ms = 0;
  auto ms = MessageStore::Open(tokimq::FileSystem::Default(), &clock, mo);
  if (!ms.ok()) return std::fprintf(stderr, "%s\n", ms.status().ToString().c_str()), 1;
  tokimq::TimerStoreOptions to;
  to.dir = dir + "/timer";
  auto ts = TimerStore::Open(tokimq::FileSystem::Default(), &clock, ms->get(), to);
  if (!ts.ok()) return std::fprintf(stderr, "%s\n", ts.status().ToString().c_str()), 1;

  double send_wall = 0, send_cpu = 0, timer_wall = 0, retention_wall = 0;
  int64_t sent = 0, deleted = 0, seq = 0;
  const std::string body(100, 'b');
  std::printf("hour stored_MB written_MB pending deleted_segments\n");
  std::future<absl::StatusOr<int>> pass;
  auto finish_pass = [&]() -> bool {
    if (!pass.valid()) return true;
    auto n = pass.get();
    if (!n.ok()) return std::fprintf(stderr, "%s\n", n.status().ToString().c_str()), false;
    deleted += *n;
    return true;
  };
  for (int64_t r = 0; r < rounds; ++r) {
    for (int64_t done = 0; done < per_round; done += 500) {
      std::vector<ScheduleItem> items(
          static_cast<size_t>(std::min<int64_t>(500, per_round - done)));
      for (ScheduleItem& it : items) {
        it.msg.topic = "churn";
        it.msg.body = body;
        it.msg.properties["MSG_ID"] = std::to_string(seq);
        const bool delayed = (seq++ % 100) < delayed_pct;
        it.deliver_ms = clock.NowMs() + (delayed ? delay_ms : 0);
      }
      const auto t = std::chrono::steady_clock::now();
      const double c = CpuSeconds();
      auto res = (*ts)->ScheduleBatch(std::move(items));
      send_cpu += CpuSeconds() - c;
      send_wall += Since(t);
      if (!res.ok()) return std::fprintf(stderr, "%s\n", res.status().ToString().c_str()), 1;
      sent += static_cast<int64_t>(res->size());
    }
    auto t = std::chrono::steady_clock::now();
    if (!(*ts)->RunUntilIdle().ok()) return 1;
    timer_wall += Since(t);
    if (!finish_pass()) return 1;
    clock.AdvanceMs(round_ms);
    if (!(*ts)->RunUntilIdle().ok()) return 1;
    pass = std::async(std::launch::async, [&] {
      const auto t0 = std::chrono::steady_clock::now();
      auto n = (*ms)->DeleteExpired(retention_ms);
      retention_wall += Since(t0);
      return n;
    });
    if ((r + 1) * round_ms % 3'600'000 == 0) {
      const auto* log = (*ms)->commit_log();
      std::printf("%lld %.1f %.1f %lld %lld\n",
                  static_cast<long long>((r + 1) * round_ms / 3'600'000),
                  static_cast<double>(log->MaxOffset() - log->MinOffset()) / (1 << 20),
                  static_cast<double>(log->MaxOffset().value()) / (1 << 20),
                  static_cast<long long>((*ts)->metrics().pending.Value()),
                  static_cast<long long>(deleted));
    }
  }
  if (!finish_pass()) return 1;
  std::printf(
      "sent=%lld send_rate=%.0f msg/s (wall) %.0f msg/s (cpu) timer_s=%.2f retention_s=%.2f\n",
      static_cast<long long>(sent), static_cast<double>(sent) / send_wall,
      static_cast<double>(sent) / send_cpu, timer_wall, retention_wall);
  // What finding survivors by scanning segments would cost: every stored record read once.
  {
    const auto* log = (*ms)->commit_log();
    const auto t = std::chrono::steady_clock::now();
    int64_t records = 0;
    for (PhysicalOffset at = log->MinOffset(); at < log->MaxOffset();) {
      auto next = log->ReadNext(at);
      if (!next.ok() || next->second <= at) break;
      at = next->second;
      ++records;
    }
    const double s = Since(t);
    std::printf("segment scan: %lld records, %.1f MB in %.3f s (%.0f records/s)\n",
                static_cast<long long>(records),
                static_cast<double>(log->MaxOffset() - log->MinOffset()) / (1 << 20), s,
                static_cast<double>(records) / s);
  }
  ts->reset();
  (void)(*ms)->Close();
  std::filesystem::remove_all(dir);
  return 0;
}
