// The hand-off of a group commit round's answers to the I/O threads (issue 21 item 1, round 3
// step 1), both ways in one run: one asio::post per answered send (main), or one post per I/O
// thread per round through HandOffBatch (what GroupCommit::RunRound opens and
// Connection::Complete uses since round 3). No disk, no sockets written: what is measured is
// the hand-off itself.
//
// Two I/O threads each run an io_context with a reactor (one UDP socket with a receive
// pending, so an idle thread sleeps in epoll as the broker's do). Each round: `--n` waiters
// are submitted to a GroupCommit (no sync thread; the SyncFn does nothing), their sends
// spread over the two I/O threads; RunRound answers them; each answer's task (one counter
// increment) runs on its I/O thread; the main thread waits until all have run (one wake per
// round, the same in both ways). Per answered send it prints process context switches
// (voluntary + involuntary, getrusage), CPU µs and wall µs, and the posts made.
// Usage: hand_off_bench [--n 128] [--rounds 3000] [--pairs 3]   (ways alternate, `pairs` times)
#include <sys/resource.h>

#include <utility>  // before any boost/asio header (Boost 1.74 with C++20)

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commitlog/group_commit.h"
#include "common/hand_off_batch.h"

namespace tokimq {
namespace {

namespace asio = boost::asio;

struct IoThread {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  asio::ip::udp::socket socket{io};
  char buf[16];
  std::thread thread;

  void Start() {
    socket.open(asio::ip::udp::v4());
    socket.bind(asio::ip::udp::endpoint(asio::ip::address_v4::loopback(), 0));
    socket.async_receive(asio::buffer(buf), [](boost::system::error_code, size_t) {});
    thread = std::thread([this] { io.run(); });
  }
  void Stop() {
    guard.reset();
    asio::post(io, [this] { socket.close(); });
    thread.join();
  }
  static void PostBatch(void* t, std::vector<HandOffBatch::Task> tasks) {
    asio::post(static_cast<IoThread*>(t)->io, [tasks = std::move(tasks)]() mutable {
      for (HandOffBatch::Task& task : tasks) std::move(task)();
    });
  }
};

struct Totals {
  double ctxsw = 0, cpu_us = 0, wall_us = 0;
  int64_t posts = 0, answers = 0;
};

std::atomic<int64_t> posts{0};

double CpuUs(const rusage& r) {
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
}

Totals Run(bool batched, int n, int rounds) {
  IoThread io[2];
  for (IoThread& t : io) t.Start();
  std::mutex mu;
  std::condition_variable cv;
  int64_t ran = 0;  // guarded by mu
  int64_t end = 0;
  GroupCommit gc(
      0, [&end] { return end; }, [](int64_t, int64_t) { return absl::OkStatus(); }, false);
  posts = 0;
  rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < n; ++i) {
      IoThread* target = &io[i % 2];
      gc.Submit(++end, [&, target, batched](absl::Status) {
        HandOffBatch::Task task = [&] {
          std::lock_guard<std::mutex> l(mu);
          if (++ran % n == 0) cv.notify_one();
        };
        if (batched && HandOffBatch::Add(target, &IoThread::PostBatch, task)) return;
        posts.fetch_add(1, std::memory_order_relaxed);
        asio::post(target->io, [task = std::move(task)]() mutable { std::move(task)(); });
      });
    }
    gc.RunRound();
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return ran == static_cast<int64_t>(round + 1) * n; });
  }
  const auto t1 = std::chrono::steady_clock::now();
  getrusage(RUSAGE_SELF, &r1);
  for (IoThread& t : io) t.Stop();
  Totals out;
  out.answers = static_cast<int64_t>(rounds) * n;
  out.ctxsw = static_cast<double>((r1.ru_nvcsw + r1.ru_nivcsw) - (r0.ru_nvcsw + r0.ru_nivcsw));
  out.cpu_us = CpuUs(r1) - CpuUs(r0);
  out.wall_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
  out.posts = batched ? 2 * static_cast<int64_t>(rounds) : posts.load();
  return out;
}

}  // namespace
}  // namespace tokimq

int main(int argc, char** argv) {
  int n = 128, rounds = 3000, pairs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--pairs")) pairs = std::atoi(argv[i + 1]);
  }
  if (n < 1 || rounds < 1 || pairs < 1) {
    std::fprintf(stderr, "usage: hand_off_bench [--n N>=1] [--rounds R>=1] [--pairs P>=1]\n");
    return 2;
  }
  std::printf("%d answers per round over 2 I/O threads, %d rounds per run\n", n, rounds);
  std::printf("%-6s %4s %12s %12s %12s %12s\n", "way", "pair", "ctxsw/send", "cpu_us/send",
              "wall_us/send", "posts/send");
  for (int p = 1; p <= pairs; ++p) {
    for (bool batched : {false, true}) {
      tokimq::Totals t = tokimq::Run(batched, n, rounds);
      const double a = static_cast<double>(t.answers);
      std::printf("%-6s %4d %12.3f %12.3f %12.3f %12.4f\n", batched ? "batch" : "post", p,
                  t.ctxsw / a, t.cpu_us / a, t.wall_us / a, static_cast<double>(t.posts) / a);
    }
  }
  return 0;
}
