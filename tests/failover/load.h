// The checked load of the fault tests (tests/failover): a producer of delayed messages and a
// consumer group that record everything they see in a History (failover/history.h), shared by
// failover_test.cc (leader kill / pause), partition_test.cc (leader isolation),
// broker_groups_test.cc (two groups: follower kill, etcd restart) and
// disk_full_follower_test.cc.
//
// ProduceLoop / ConsumeLoop run on their own threads until their stop flag is set; CheckedLoad
// owns such a pair (and joins them in its destructor, so a failed ASSERT in a test body never
// leaves a thread running). Real time throughout: these tests drive real processes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/cluster_consumer.h"
#include "client/cluster_producer.h"
#include "client/route_cache.h"
#include "common/clock.h"
#include "failover/history.h"
#include "support/await.h"

namespace tokimq::testing {

inline int64_t NowMs() { return SystemClock::Default()->NowMs(); }

// The integer in environment variable `name`, or `fallback` when it is not set.
inline int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// The p-quantile (0..1, nearest rank) of `v`; 0 for an empty `v`.
inline int64_t Percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

// Sends batches of 10 delayed messages (0.5-2.5 s) to `topic` every ~15 ms until stopped,
// through a ClusterProducer (it waits out a failover); ids are "<prefix><n>". Records every
// attempt and ack; counts acknowledged sends in *acked and the time of the last in *last_ok_ms.
inline void ProduceLoop(const client::ClientOptions& bootstrap, History* h,
                        std::atomic<bool>* stop, std::atomic<int64_t>* last_ok_ms,
                        std::atomic<int64_t>* acked, const std::string& topic = "orders",
                        const std::string& prefix = "m") {
  client::ClusterProducer producer(bootstrap);
  std::mt19937 rng(7);
  int64_t seq = 0;
  while (!stop->load()) {
    std::vector<client::OutgoingMessage> batch;
    const int64_t now = NowMs();
    for (int k = 0; k < 10; ++k) {
      client::OutgoingMessage m;
      m.topic = topic;
      m.body = prefix + std::to_string(seq++);
      const int64_t delay = 500 + static_cast<int64_t>(rng() % 2000);
      m.delay_ms = delay;
      h->Attempt(m.body, now + delay);
      batch.push_back(std::move(m));
    }
    auto r = producer.SendBatch(batch);
    if (r.ok()) {
      for (size_t k = 0; k < r->size(); ++k) h->SendOk(batch[k].body, (*r)[k].deliver_at_ms);
      last_ok_ms->store(NowMs());
      acked->fetch_add(static_cast<int64_t>(r->size()));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the client's retry pause
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
}

// The checker consumer's invisible duration. A receive whose answer failed (sync mode with no
// follower: UNAVAILABLE after the ack timeout) leaves its messages leased on the leader; they
// come back after this long, so Drain waits longer than it without progress.
constexpr int64_t kCheckerInvisibleMs = 30'000;
// The broker's first redelivery backoff (ConsumerService's default schedule: 10 s, 30 s, ...):
// an expired lease's message is receivable again this long after the lease ended.
constexpr int64_t kFirstRetryBackoffMs = 10'000;
// How long a drain waits without progress before it counts the rest as lost: a message whose
// receive answer was lost at a kill comes back invisible + backoff after that receive, and the
// last progress may come right after it. (A window of 30 s made FailoverTest.KillNine... report
// 1-3 "lost" sends in ~1 of 10-15 runs. A kept run showed why: m5084 was released 1 ms before
// the 10th kill, the receive answer died with the leader, the replicated lease expired on the
// new leader and its %RETRY% copy was due 40 s after the release, after the window had ended.)
constexpr int64_t kDrainNoProgressMs = kCheckerInvisibleMs + kFirstRetryBackoffMs + 5'000;

// Receives and acks `topic` with group "checker" until stopped; records every receipt and counts
// the receive calls made in *rounds.
inline void ConsumeLoop(const client::ClientOptions& bootstrap, History* h,
                        std::atomic<bool>* stop, std::atomic<int64_t>* rounds,
                        const std::string& topic = "orders") {
  client::ClusterConsumer consumer(bootstrap, "checker");
  client::ReceiveOptions ro;
  ro.max_messages = 64;
  ro.invisible_ms = kCheckerInvisibleMs;
  ro.long_poll_ms = 200;
  while (!stop->load()) {
    auto msgs = consumer.Receive(topic, ro);
    rounds->fetch_add(1);
    if (!msgs.ok()) continue;
    const int64_t now = NowMs();
    std::vector<std::string> handles;
    for (const client::ReceivedMessage& m : *msgs) {
      std::string group, handle;
      (void)client::SplitBrokerHandle(m.receipt_handle, &group, &handle);
      auto source = m.properties.find("TIMER_SRC_OFFSET");
      h->Received(m.body, group, m.queue_id, m.queue_offset.value(), now, m.delivery_attempt,
                  source == m.properties.end() ? std::string() : source->second);
      handles.push_back(m.receipt_handle);
    }
    if (!handles.empty()) (void)consumer.AckBatch(handles);  // old-leader handles may fail
  }
}

// Prints the checker's report of `h` and holds it to sync mode's promise (docs/cluster.md
// "Guarantees per ack mode"): something was acknowledged, 0 acknowledged sends lost, 0 received
// early, 0 phantom receipts. Duplicates are printed, not asserted.
inline void ExpectSyncGuarantees(const History& h) {
  History::Report r = h.Check();
  std::printf("history: %s\n", r.ToString().c_str());
  EXPECT_GT(r.acknowledged, 0);
  EXPECT_EQ(r.lost, 0) << r.ToString();
  EXPECT_EQ(r.early, 0) << r.ToString();
  EXPECT_EQ(r.phantom, 0) << r.ToString();
}

// Async mode's promise (docs/cluster.md "Guarantees per ack mode"): an acknowledged send may be
// lost only if it was acknowledged inside one of `windows` ([from, to] client ms: from a leader's
// isolation, less the replication lag, to its successor's election); 0 early, 0 phantom.
inline void ExpectAsyncGuarantees(const History& h,
                                  const std::vector<std::pair<int64_t, int64_t>>& windows) {
  History::Report r = h.Check();
  std::printf("history: %s\n", r.ToString().c_str());
  EXPECT_GT(r.acknowledged, 0);
  int64_t outside = 0;
  for (int64_t at : r.lost_ack_ms) {
    bool inside = false;
    for (const auto& [from, to] : windows) inside = inside || (at >= from && at <= to);
    if (!inside) ++outside;
  }
  EXPECT_EQ(outside, 0) << "acknowledged sends lost outside a leader's isolation window; "
                        << r.ToString();
  EXPECT_EQ(r.early, 0) << r.ToString();
  EXPECT_EQ(r.phantom, 0) << r.ToString();
}

// A ProduceLoop and a ConsumeLoop on `topic` through `bootstrap`, recording into `history`.
// Start() starts both; the destructor stops and joins whatever still runs.
class CheckedLoad {
 public:
  CheckedLoad(client::ClientOptions bootstrap, History* history, std::string topic = "orders")
      : bootstrap_(std::move(bootstrap)), history_(history), topic_(std::move(topic)) {}
  ~CheckedLoad() {
    StopProducer();
    StopConsumer();
  }

  void Start() {
    producer_ = std::thread(ProduceLoop, bootstrap_, history_, &stop_producer_, &last_ok_ms_,
                            &acked_, topic_, std::string("m"));
    consumer_ = std::thread(ConsumeLoop, bootstrap_, history_, &stop_consumer_, &rounds_, topic_);
  }
  // Waits (up to `timeout`) until `n` more sends were acknowledged than when it was called.
  ::testing::AssertionResult AwaitSends(
      int64_t n, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    const int64_t target = acked_.load() + n;
    return AwaitTrue([&] { return acked_.load() >= target; }, timeout,
                     std::to_string(n) + " more acknowledged sends", std::chrono::milliseconds(5));
  }
  void StopProducer() {
    stop_producer_ = true;
    if (producer_.joinable()) producer_.join();
  }
  // Stops the producer, then waits while the consumer makes progress until every acknowledged
  // send was received (no progress for `no_progress` ends the wait — by default
  // kDrainNoProgressMs; Check then counts the rest as lost), lets three more receive calls see
  // late duplicates, and stops the consumer.
  void Drain(std::chrono::milliseconds no_progress =
                 std::chrono::milliseconds(kDrainNoProgressMs)) {
    StopProducer();
    int64_t outstanding = history_->Outstanding();
    auto last_progress = std::chrono::steady_clock::now();
    (void)AwaitTrue(
        [&] {
          const int64_t now_outstanding = history_->Outstanding();
          if (now_outstanding < outstanding) last_progress = std::chrono::steady_clock::now();
          outstanding = now_outstanding;
          return outstanding == 0 ||
                 std::chrono::steady_clock::now() - last_progress > no_progress;
        },
        std::chrono::minutes(30), "every acknowledged message received",
        std::chrono::milliseconds(100));
    const int64_t rounds_then = rounds_.load();
    (void)AwaitTrue([&] { return rounds_.load() >= rounds_then + 3; }, std::chrono::seconds(30),
                    "three more receive calls", std::chrono::milliseconds(5));
    StopConsumer();
  }
  void StopConsumer() {
    stop_consumer_ = true;
    if (consumer_.joinable()) consumer_.join();
  }
  int64_t acked() const { return acked_.load(); }
  int64_t last_ok_ms() const { return last_ok_ms_.load(); }

 private:
  client::ClientOptions bootstrap_;
  History* history_;
  std::string topic_;
  std::atomic<bool> stop_producer_{false}, stop_consumer_{false};
  std::atomic<int64_t> last_ok_ms_{0}, acked_{0}, rounds_{0};
  std::thread producer_, consumer_;
};

}  // namespace tokimq::testing
