// Issue 25: thousands of delay topics under `ulimit -n 1024` (Debian's systemd default). Before,
// every ConsumeQueue held a descriptor: the timer failed on EMFILE and retried forever (an error
// storm), nothing more was delivered, and SIGTERM exited 1. The real broker binary runs with
// RLIMIT_NOFILE 1024 (soft and hard) and a manual clock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "support/await.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::OutgoingMessage;

constexpr int kTopics = 2000;
constexpr int kQueues = 8;
constexpr int64_t kDelayMs = 60'000;

struct LogCounts {
  int lines = 0;  // not counting one "topic ... created" line per topic
  int warnings = 0;
  int errors = 0;
};

LogCounts CountLog(const std::string& path) {
  LogCounts c;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("] topic ") == std::string::npos || line.find(" created: ") == std::string::npos) {
      ++c.lines;
    }
    if (line.find("[warning]") != std::string::npos) ++c.warnings;
    if (line.find("[error]") != std::string::npos) ++c.errors;
  }
  return c;
}

// The broker log without its "topic ... created" lines, for failure messages.
std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find(" created: ") == std::string::npos) out += line + "\n";
  }
  return out.size() > 20000 ? out.substr(out.size() - 20000) : out;
}

std::string Topic(int t) { return "delay" + std::to_string(t); }

constexpr int kClients = 4;

// Runs fn(0) .. fn(kClients - 1) on threads of their own and waits for them.
void RunClients(const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int w = 0; w < kClients; ++w) threads.emplace_back(fn, w);
  for (auto& t : threads) t.join();
}

// Real time of one phase, printed for the record (the machine may be loaded).
class PhaseTimer {
 public:
  void Done(const char* what) {
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "phase %s: %.2f s\n", what,
                 std::chrono::duration<double>(now - t0_).count());
    t0_ = now;
  }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

TEST(FdLimitTest, TwoThousandDelayTopicsOfEightQueuesUnder1024Descriptors) {
  tokimq::testing::TempDir dir;
  tokimq::testing::BrokerProcess broker(dir.Join("data"), {"--manual-clock", "--grpc-port", "0"});
  broker.set_nofile_limit(1024);
  PhaseTimer timer;
  ASSERT_TRUE(broker.Start()) << "see " << dir.Join("data.log");
  timer.Done("start");
  client::AdminClient admin(broker.Options());

  // kClients connections work in parallel, client w on the topics t with t % kClients == w:
  // one synchronous round trip per topic made most of the test's time.
  std::atomic<int> failures{0};
  RunClients([&](int w) {
    client::AdminClient a(broker.Options());
    for (int t = w; t < kTopics; t += kClients) {
      proto::TopicConfig cfg;
      cfg.set_name(Topic(t));
      cfg.set_type(proto::DELAY);
      cfg.set_queues(kQueues);
      cfg.set_max_delay_ms(2 * kDelayMs);
      auto created = a.CreateTopic(cfg);
      if (!created.ok()) {
        ADD_FAILURE() << Topic(t) << ": " << created.status();
        failures++;
        return;
      }
    }
  });
  ASSERT_EQ(failures.load(), 0);
  timer.Done("create");
  // Eight delayed messages per topic in one batch: round robin puts one in every queue.
  RunClients([&](int w) {
    client::Producer producer(broker.Options());
    for (int t = w; t < kTopics; t += kClients) {
      std::vector<OutgoingMessage> batch(kQueues);
      for (int q = 0; q < kQueues; ++q) {
        batch[q].topic = Topic(t);
        batch[q].body = Topic(t) + "#" + std::to_string(q);
        batch[q].delay_ms = kDelayMs;
      }
      auto sent = producer.SendBatch(batch);
      if (!sent.ok()) {
        ADD_FAILURE() << Topic(t) << ": " << sent.status();
        failures++;
        return;
      }
      std::vector<bool> seen(kQueues);
      for (const auto& r : *sent) seen[static_cast<size_t>(r.queue_id)] = true;
      for (int q = 0; q < kQueues; ++q) {
        if (!seen[q]) {
          ADD_FAILURE() << Topic(t) << " queue " << q << " got no message";
          failures++;
        }
      }
    }
  });
  ASSERT_EQ(failures.load(), 0);
  timer.Done("send");
  ASSERT_TRUE(tokimq::testing::AwaitTimerEnqueued(admin).ok());
  timer.Done("enqueue");
  ASSERT_TRUE(admin.AdvanceClock(kDelayMs + 1000).ok());

  // The timer moves all 16,000 into 16,000 ConsumeQueues (bounded real time).
  const int64_t total = int64_t{kTopics} * kQueues;
  int64_t delivered = 0;
  absl::Status stats_status;
  EXPECT_TRUE(tokimq::testing::AwaitTrue(
      [&] {
        auto st = admin.Stats();
        stats_status = st.status();
        if (st.ok()) delivered = st->timer().delivered();
        return !st.ok() || delivered >= total;
      },
      std::chrono::seconds(40), "every message moved to its topic", std::chrono::milliseconds(50)));
  ASSERT_TRUE(stats_status.ok()) << stats_status;
  ASSERT_EQ(delivered, total) << LogTail(dir.Join("data.log"));
  timer.Done("deliver");

  // Every message can be received from its topic, each once.
  std::atomic<int64_t> received{0};
  RunClients([&](int w) {
    client::SimpleConsumer consumer(broker.Options(), "g");
    client::ReceiveOptions ro;
    ro.max_messages = 32;
    ro.long_poll_ms = 0;
    for (int t = w; t < kTopics; t += kClients) {
      std::vector<bool> seen(kQueues);
      int got_here = 0;
      for (int attempt = 0; attempt < 4 && got_here < kQueues; ++attempt) {
        auto got = consumer.Receive(Topic(t), ro);
        if (!got.ok()) {
          ADD_FAILURE() << Topic(t) << ": " << got.status();
          return;
        }
        for (const auto& m : *got) {
          EXPECT_FALSE(seen[static_cast<size_t>(m.queue_id)]) << Topic(t) << " twice";
          seen[static_cast<size_t>(m.queue_id)] = true;
          EXPECT_EQ(m.body, Topic(t) + "#" + std::to_string(m.queue_id));
          ++got_here;
        }
      }
      EXPECT_EQ(got_here, kQueues) << Topic(t);
      received += got_here;
    }
  });
  EXPECT_EQ(received.load(), total);
  timer.Done("receive");

  // The broker's descriptors stay within its budget.
  int fds = 0;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(broker.pid()) + "/fd")) {
    (void)e;
    ++fds;
  }
  // 1024 - 64 reserved, halved: a cache of 480 ConsumeQueue files, plus ~20 fixed descriptors
  // and the test's connections (16,000 queue files were open before).
  EXPECT_LE(fds, 480 + 64) << "open descriptors";

  EXPECT_EQ(broker.Stop(), 0);  // SIGTERM: clean exit
  timer.Done("stop");
  // No error storm: a quiet log (before: 1.2 million error lines).
  const LogCounts log = CountLog(dir.Join("data.log"));
  EXPECT_EQ(log.errors, 0) << "see " << dir.Join("data.log");
  EXPECT_LE(log.warnings, 5) << LogTail(dir.Join("data.log"));
  EXPECT_LE(log.lines, 100) << LogTail(dir.Join("data.log"));
}

}  // namespace
}  // namespace tokimq
