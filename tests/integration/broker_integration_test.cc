// Black-box tests of tokimq-broker: the real binary on a free port and a temp dir, driven by
// the C++ client. Long delays use --manual-clock and the AdvanceClock admin request.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::AdminClient;
using client::OutgoingMessage;
using client::Producer;
using client::ReceivedMessage;
using client::ReceiveOptions;
using client::SimpleConsumer;
using testing::BrokerProcess;

constexpr int64_t kSecond = 1000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;

class BrokerIntegrationTest : public ::testing::Test {
 protected:
  void StartBroker(std::vector<std::string> args = {"--manual-clock"}) {
    broker_ = std::make_unique<BrokerProcess>(dir_.Join("data"), std::move(args));
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    admin_ = std::make_unique<AdminClient>(broker_->Options());
    producer_ = std::make_unique<Producer>(broker_->Options());
  }
  void Restart(bool crash) {
    if (crash) {
      broker_->Kill();
    } else {
      ASSERT_EQ(broker_->Stop(), 0);
    }
    ASSERT_TRUE(broker_->Start());
    admin_ = std::make_unique<AdminClient>(broker_->Options());
    producer_ = std::make_unique<Producer>(broker_->Options());
  }
  void CreateTopic(const std::string& name, proto::TopicType type, int queues = 2,
                   int64_t max_delay_ms = 0) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(type);
    t.set_queues(queues);
    t.set_max_delay_ms(max_delay_ms);
    auto created = admin_->CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
  }
  client::SendReceipt SendOk(OutgoingMessage m) {
    auto r = producer_->Send(m);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : client::SendReceipt{};
  }
  std::vector<ReceivedMessage> Receive(SimpleConsumer& c, const std::string& topic,
                                       int64_t long_poll_ms, int64_t invisible_ms = 30 * kSecond,
                                       int max = 16) {
    ReceiveOptions o;
    o.long_poll_ms = long_poll_ms;
    o.invisible_ms = invisible_ms;
    o.max_messages = max;
    auto got = c.Receive(topic, o);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *got : std::vector<ReceivedMessage>{};
  }
  // Long-polls until something arrives or `total_ms` of real time passed (bounded: the broker
  // is a separate process on a shared machine, possibly under sanitizers).
  std::vector<ReceivedMessage> ReceiveWithin(SimpleConsumer& c, const std::string& topic,
                                             int64_t total_ms = 30'000,
                                             int64_t invisible_ms = 30 * kSecond, int max = 16) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(total_ms);
    while (true) {
      auto got = Receive(c, topic, 2000, invisible_ms, max);
      if (!got.empty() || std::chrono::steady_clock::now() >= deadline) return got;
    }
  }
  // Advances the broker clock in `step` increments (each followed by a short long poll) until
  // a message arrives; at most `limit` of broker time.
  std::vector<ReceivedMessage> AdvanceUntilReceived(SimpleConsumer& c, const std::string& topic,
                                                    int64_t step, int64_t limit,
                                                    int64_t invisible_ms = 30 * kSecond) {
    for (int64_t moved = 0; moved <= limit; moved += step) {
      auto got = Receive(c, topic, 300, invisible_ms);
      if (!got.empty()) return got;
      EXPECT_TRUE(admin_->AdvanceClock(step).ok());
    }
    return {};
  }
  // Broker state for failure messages: clock, topic depths, timer gauges.
  std::string Diagnostics() {
    auto st = admin_->Stats();
    if (!st.ok()) return st.status().ToString();
    std::string out = "broker now_ms=" + std::to_string(st->now_ms());
    for (const auto& t : st->topics()) {
      out += " topic " + t.name() + " depth=" + std::to_string(t.depth());
    }
    const auto& tm = st->timer();
    out += " timer pending=" + std::to_string(tm.pending()) +
           " delivered=" + std::to_string(tm.delivered()) +
           " recalled=" + std::to_string(tm.recalled()) +
           " enqueue_lag=" + std::to_string(tm.enqueue_lag()) +
           " dequeue_lag_ms=" + std::to_string(tm.dequeue_lag_ms());
    return out;
  }
  void AwaitTimerEnqueued() {
    absl::Status s = tokimq::testing::AwaitTimerEnqueued(*admin_);
    ASSERT_TRUE(s.ok()) << s << " " << Diagnostics();
  }
  int64_t BrokerNow() {
    auto st = admin_->Stats();
    EXPECT_TRUE(st.ok());
    return st.ok() ? st->now_ms() : 0;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
  std::unique_ptr<AdminClient> admin_;
  std::unique_ptr<Producer> producer_;
};

TEST_F(BrokerIntegrationTest, SendReceiveRoundTripAndDoubleAckRefused) {
  StartBroker();
  CreateTopic("orders", proto::NORMAL);
  OutgoingMessage m;
  m.topic = "orders";
  m.body = std::string("payload\0with nul", 16);
  m.key = "order-1";
  m.tag = "created";
  m.properties["trace"] = "abc";
  client::SendReceipt sent = SendOk(m);
  EXPECT_FALSE(sent.message_id.empty());
  EXPECT_FALSE(sent.delayed);
  EXPECT_EQ(sent.queue_offset, QueueOffset(0));

  SimpleConsumer consumer(broker_->Options(), "billing");
  auto got = ReceiveWithin(consumer, "orders");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, m.body);
  EXPECT_EQ(got[0].key, "order-1");
  EXPECT_EQ(got[0].tag, "created");
  EXPECT_EQ(got[0].properties.at("trace"), "abc");
  EXPECT_EQ(got[0].message_id, sent.message_id);
  EXPECT_EQ(got[0].delivery_attempt, 1);
  EXPECT_EQ(got[0].queue_id, sent.queue_id);
  EXPECT_TRUE(Receive(consumer, "orders", 200).empty());  // leased

  ASSERT_TRUE(consumer.Ack(got[0].receipt_handle).ok());
  absl::Status again = consumer.Ack(got[0].receipt_handle);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
}

TEST_F(BrokerIntegrationTest, ValidationErrorsStoreNothing) {
  StartBroker();
  CreateTopic("orders.timeout", proto::DELAY, 2, 7 * kDay);
  OutgoingMessage m;
  m.topic = "orders.timeout";
  m.body = "x";
  m.delay_ms = 8 * kDay;
  auto r = producer_->Send(m);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("max delay"), absl::string_view::npos) << r.status();
  m.delay_ms = std::nullopt;
  m.topic = "nope";
  EXPECT_EQ(producer_->Send(m).status().code(), absl::StatusCode::kNotFound);
  // A batch with one bad entry stores none of them.
  OutgoingMessage good;
  good.topic = "orders.timeout";
  good.body = "ok";
  auto batch = producer_->SendBatch({good, m});
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kNotFound);
  // Properties the timer store acts on are refused, delayed or not (a TIMER_DELETE_OF would
  // cancel another pending message; a TIMER_SRC_OFFSET would make recovery drop one).
  for (const char* reserved : {"TIMER_DELETE_OF", "TIMER_SRC_OFFSET"}) {
    for (bool delayed : {true, false}) {
      OutgoingMessage forged = good;
      forged.properties[reserved] = "0";
      if (delayed) forged.delay_ms = 1000;
      auto f = producer_->Send(forged);
      EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << reserved;
      EXPECT_NE(f.status().message().find(reserved), absl::string_view::npos) << f.status();
    }
  }
  auto st = admin_->Stats();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->topics_size(), 1);
  EXPECT_EQ(st->topics(0).depth(), 0);
  EXPECT_EQ(st->timer().pending(), 0);
}

TEST_F(BrokerIntegrationTest, DelayIsHonouredAndNeverEarly) {
  StartBroker();
  CreateTopic("orders.timeout", proto::DELAY);
  OutgoingMessage m;
  m.topic = "orders.timeout";
  m.body = "cancel order 7";
  m.delay_ms = 10 * kMinute;
  client::SendReceipt sent = SendOk(m);
  EXPECT_TRUE(sent.delayed);
  EXPECT_FALSE(sent.recall_handle.empty());
  SimpleConsumer consumer(broker_->Options(), "canceller");
  EXPECT_TRUE(Receive(consumer, "orders.timeout", 300).empty());
  ASSERT_TRUE(admin_->AdvanceClock(10 * kMinute - kSecond).ok());
  EXPECT_TRUE(Receive(consumer, "orders.timeout", 1000).empty()) << "delivered early";
  ASSERT_TRUE(admin_->AdvanceClock(kSecond).ok());
  auto got = ReceiveWithin(consumer, "orders.timeout");
  ASSERT_EQ(got.size(), 1u) << Diagnostics();
  EXPECT_EQ(got[0].body, "cancel order 7");
  EXPECT_GE(got[0].deliver_ms, sent.deliver_at_ms);
  EXPECT_GE(BrokerNow(), sent.deliver_at_ms);
  // Stats exports the release-lateness histogram: non-empty buckets, ascending, summing to the
  // count, agreeing with the percentile fields.
  auto st = admin_->Stats();
  ASSERT_TRUE(st.ok()) << st.status();
  const proto::TimerStats& tm = st->timer();
  ASSERT_GE(tm.lateness_count(), 1);
  ASSERT_GE(tm.lateness_buckets_size(), 1);
  int64_t sum = 0, previous_upper = -1;
  for (const proto::LatenessBucket& b : tm.lateness_buckets()) {
    EXPECT_GT(b.count(), 0);
    EXPECT_GT(b.upper_ms(), previous_upper);
    previous_upper = b.upper_ms();
    sum += b.count();
  }
  EXPECT_EQ(sum, tm.lateness_count());
  EXPECT_GE(previous_upper, tm.lateness_max_ms());
  EXPECT_LE(tm.lateness_p99_ms(), tm.lateness_max_ms());
}

TEST_F(BrokerIntegrationTest, DeliverAtInThePastGoesStraightThrough) {
  StartBroker();
  CreateTopic("t", proto::DELAY);
  OutgoingMessage m;
  m.topic = "t";
  m.body = "now";
  m.deliver_at_ms = 1000;  // 1970
  client::SendReceipt sent = SendOk(m);
  EXPECT_FALSE(sent.delayed);
  SimpleConsumer consumer(broker_->Options(), "g");
  EXPECT_EQ(ReceiveWithin(consumer, "t").size(), 1u);
}

TEST_F(BrokerIntegrationTest, RecalledMessageIsNeverDelivered) {
  StartBroker();
  CreateTopic("t", proto::DELAY);
  OutgoingMessage m;
  m.topic = "t";
  m.body = "recall me";
  m.delay_ms = kHour;
  client::SendReceipt sent = SendOk(m);
  m.body = "keep me";
  SendOk(m);
  ASSERT_TRUE(producer_->Recall(sent.recall_handle).ok());
  EXPECT_EQ(producer_->Recall(sent.recall_handle).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(producer_->Recall("garbage!").code(), absl::StatusCode::kInvalidArgument);
  AwaitTimerEnqueued();
  ASSERT_TRUE(admin_->AdvanceClock(2 * kHour).ok());
  SimpleConsumer consumer(broker_->Options(), "g");
  auto got = ReceiveWithin(consumer, "t");
  ASSERT_EQ(got.size(), 1u) << Diagnostics();
  EXPECT_EQ(got[0].body, "keep me");
  auto st = admin_->Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->timer().recalled(), 1);
  EXPECT_TRUE(Receive(consumer, "t", 500).empty());
}

// A delayed message linked into the timer wheel after the dequeue walk already passed its tick
// must still come out at its deliver time, without the clock moving again. Here: a 100 ms delay
// sent to an idle broker whose (manual) clock sits on a tick boundary, so the walk is ahead of
// the message's tick. This is the deterministic form of the RecalledMessageIsNeverDelivered
// flake (there the enqueue thread lagged behind a 2 h AdvanceClock under ASan load).
// timerstore's LinkUnitLocked hands such units to the fine scheduler at once (they do not
// wait for the clock to reach the next tick).
TEST_F(BrokerIntegrationTest, DueMessageEnqueuedAfterTheWalkIsNotStuck) {
  StartBroker({"--manual-clock", "--manual-clock-start-ms", "1700000000000"});
  CreateTopic("t", proto::DELAY);
  OutgoingMessage m;
  m.topic = "t";
  m.body = "in 100 ms";
  m.delay_ms = 100;
  client::SendReceipt sent = SendOk(m);
  ASSERT_TRUE(sent.delayed);
  SimpleConsumer consumer(broker_->Options(), "g");
  EXPECT_TRUE(Receive(consumer, "t", 300).empty()) << "delivered early";
  ASSERT_TRUE(admin_->AdvanceClock(100).ok());
  auto got = ReceiveWithin(consumer, "t", 10'000);
  ASSERT_EQ(got.size(), 1u) << Diagnostics();
  EXPECT_EQ(got[0].body, "in 100 ms");
}

TEST_F(BrokerIntegrationTest, LeaseExpiryRedeliversWithAttemptTwo) {
  StartBroker();
  CreateTopic("t", proto::NORMAL);
  OutgoingMessage m;
  m.topic = "t";
  m.body = "work";
  client::SendReceipt sent = SendOk(m);
  SimpleConsumer consumer(broker_->Options(), "workers");
  auto first = ReceiveWithin(consumer, "t", 30'000, 30 * kSecond);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].delivery_attempt, 1);
  ASSERT_TRUE(admin_->AdvanceClock(29 * kSecond).ok());
  EXPECT_TRUE(Receive(consumer, "t", 500).empty()) << "lease ended early";
  auto second = AdvanceUntilReceived(consumer, "t", 5 * kSecond, 10 * kMinute);
  ASSERT_EQ(second.size(), 1u) << Diagnostics();
  EXPECT_EQ(second[0].message_id, sent.message_id);
  EXPECT_EQ(second[0].delivery_attempt, 2);
  // The first delivery's handle is stale now.
  EXPECT_EQ(consumer.Ack(first[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(consumer.Ack(second[0].receipt_handle).ok());
}

TEST_F(BrokerIntegrationTest, RenewExtendsLeaseAndOldHandleIsRefused) {
  StartBroker();
  CreateTopic("t", proto::NORMAL);
  OutgoingMessage m;
  m.topic = "t";
  m.body = "slow work";
  SendOk(m);
  SimpleConsumer consumer(broker_->Options(), "workers");
  auto got = ReceiveWithin(consumer, "t", 30'000, 30 * kSecond);
  ASSERT_EQ(got.size(), 1u);
  auto renewed = consumer.ChangeInvisibleDuration(got[0].receipt_handle, 10 * kMinute);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_NE(*renewed, got[0].receipt_handle);
  EXPECT_EQ(consumer.Ack(got[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(admin_->AdvanceClock(5 * kMinute).ok());
  EXPECT_TRUE(Receive(consumer, "t", 1000).empty()) << "renewed lease expired early";
  EXPECT_TRUE(consumer.Ack(*renewed).ok());
  EXPECT_EQ(consumer.Ack(*renewed).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(BrokerIntegrationTest, MaxAttemptsMovesMessageToDlq) {
  std::string config = dir_.Join("broker.toml");
  {
    std::ofstream out(config);
    out << "[group.fragile]\nmax_attempts = 2\nbackoff = [\"1s\"]\n";
  }
  StartBroker({"--manual-clock", "--config", config});
  CreateTopic("t", proto::NORMAL);
  OutgoingMessage m;
  m.topic = "t";
  m.body = "poison";
  client::SendReceipt sent = SendOk(m);
  SimpleConsumer consumer(broker_->Options(), "fragile");
  auto a1 = ReceiveWithin(consumer, "t", 30'000, 10 * kSecond);
  ASSERT_EQ(a1.size(), 1u);
  auto a2 = AdvanceUntilReceived(consumer, "t", 5 * kSecond, 10 * kMinute, 10 * kSecond);
  ASSERT_EQ(a2.size(), 1u);
  EXPECT_EQ(a2[0].delivery_attempt, 2);
  // The second lease expires too: attempts exhausted -> %DLQ%fragile, never back in "t".
  SimpleConsumer dlq_reader(broker_->Options(), "ops");
  auto dead = AdvanceUntilReceived(dlq_reader, "%DLQ%fragile", 5 * kSecond, 10 * kMinute);
  ASSERT_EQ(dead.size(), 1u) << Diagnostics();
  EXPECT_EQ(dead[0].body, "poison");
  EXPECT_TRUE(Receive(consumer, "t", 500).empty());
  auto st = admin_->Stats();
  ASSERT_TRUE(st.ok());
  for (const auto& g : st->groups()) {
    if (g.group() == "fragile") {
      EXPECT_EQ(g.dlq_depth(), 1);
    }
  }
}

TEST_F(BrokerIntegrationTest, NackRedeliversAfterGivenDelay) {
  StartBroker();
  CreateTopic("t", proto::NORMAL);
  OutgoingMessage m;
  m.topic = "t";
  m.body = "retry me";
  SendOk(m);
  SimpleConsumer consumer(broker_->Options(), "g");
  auto got = ReceiveWithin(consumer, "t");
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(consumer.Nack(got[0].receipt_handle, 2 * kMinute).ok());
  EXPECT_TRUE(Receive(consumer, "t", 500).empty());
  auto again = AdvanceUntilReceived(consumer, "t", 30 * kSecond, 10 * kMinute);
  ASSERT_EQ(again.size(), 1u) << Diagnostics();
  EXPECT_EQ(again[0].delivery_attempt, 2);
}

class RestartTest : public BrokerIntegrationTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RestartTest, RestartKeepsGroupProgressAndPendingTimers) {
  const bool crash = GetParam();
  StartBroker();
  CreateTopic("t", proto::DELAY, 1);
  for (const char* body : {"one", "two", "three"}) {
    OutgoingMessage m;
    m.topic = "t";
    m.body = body;
    SendOk(m);
  }
  OutgoingMessage later;
  later.topic = "t";
  later.body = "in an hour";
  later.delay_ms = kHour;
  SendOk(later);
  {
    SimpleConsumer consumer(broker_->Options(), "g");
    auto got = ReceiveWithin(consumer, "t", 30'000, 30 * kSecond, 2);
    ASSERT_EQ(got.size(), 2u);
    for (const auto& r : got) ASSERT_TRUE(consumer.Ack(r.receipt_handle).ok());
  }
  Restart(crash);
  SimpleConsumer consumer(broker_->Options(), "g");
  auto got = ReceiveWithin(consumer, "t");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "three");
  ASSERT_TRUE(consumer.Ack(got[0].receipt_handle).ok());
  EXPECT_TRUE(Receive(consumer, "t", 300).empty());
  ASSERT_TRUE(admin_->AdvanceClock(kHour).ok());
  auto due = ReceiveWithin(consumer, "t");
  ASSERT_EQ(due.size(), 1u) << Diagnostics();
  EXPECT_EQ(due[0].body, "in an hour");
}

INSTANTIATE_TEST_SUITE_P(CleanAndCrash, RestartTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Kill9" : "Sigterm"; });

TEST_F(BrokerIntegrationTest, ManualClockStartSurvivesARestartWithoutAnyAdvance) {
  StartBroker({"--manual-clock", "--manual-clock-start-ms", "1800000000000"});
  broker_->Kill();
  StartBroker({"--manual-clock"});  // no start time: the persisted one, never the system time
  auto st = admin_->Stats();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_GE(st->now_ms(), 1'800'000'000'000);
  EXPECT_LT(st->now_ms(), 1'800'000'001'000);
}

// SIGTERM while consumers are in a 20 s long poll: the polls are ended at once (empty answers)
// and the broker exits cleanly, without waiting out the polls (up to 20 s).
TEST_F(BrokerIntegrationTest, ShutdownEndsOpenLongPolls) {
  StartBroker({});
  CreateTopic("idle", proto::NORMAL);
  std::atomic<int> started{0};
  std::vector<std::thread> pollers;
  std::vector<absl::StatusOr<std::vector<client::ReceivedMessage>>> got(
      3, absl::UnknownError("not run"));
  std::vector<int64_t> took_ms(3, 0);
  for (int i = 0; i < 3; ++i) {
    pollers.emplace_back([&, i] {
      client::SimpleConsumer consumer(broker_->Options(), "g");
      client::ReceiveOptions ro;
      ro.long_poll_ms = 20'000;
      ASSERT_TRUE(consumer.Receive("idle", client::ReceiveOptions{}).ok());  // connected
      started.fetch_add(1);
      const auto t0 = std::chrono::steady_clock::now();
      got[i] = consumer.Receive("idle", ro);
      took_ms[i] = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
    });
  }
  while (started.load() < 3) std::this_thread::yield();
  // The polls are sent right after `started`; give them a moment to reach the broker (if one
  // had not, it would fail fast on the closed connection: still no 20 s wait).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(broker_->Stop(), 0);  // SIGTERM, waits for the exit: clean
  const auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - t0)
                           .count();
  for (auto& t : pollers) t.join();
  EXPECT_LT(stop_ms, 10'000) << "shutdown waited for the long polls";
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(took_ms[i], 10'000) << i;
    // Answered (empty), not cut off: the server writes the answers of running requests before
    // it closes the connections (a fresh-eyes pass saw one lost about 1 time in 14).
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status();
    EXPECT_TRUE(got[i]->empty()) << i;
  }
}

// --flush sync: many single-message sends in flight from several connections, delayed and
// immediate, are all answered OK after an fsync covering them (the group commit answers them
// from its sync thread), share fsyncs, and survive a kill -9 right after their answers.
TEST_F(BrokerIntegrationTest, FlushSyncAnswersPipelinedSendsFromTheGroupCommit) {
  StartBroker({"--manual-clock", "--flush", "sync"});
  CreateTopic("durable", proto::DELAY, 2);
  constexpr int kConnections = 4, kEach = 64;
  std::vector<std::unique_ptr<Producer>> producers;
  for (int c = 0; c < kConnections; ++c) {
    producers.push_back(std::make_unique<Producer>(broker_->Options()));
  }
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, bad = 0;
  for (int i = 0; i < kEach; ++i) {
    for (int c = 0; c < kConnections; ++c) {
      OutgoingMessage m;
      m.topic = "durable";
      m.body = "m-" + std::to_string(c) + "-" + std::to_string(i);
      if (i % 2 == 0) m.delay_ms = 3600 * kSecond;  // half through the timer topic
      producers[c]->SendBatchAsync({m}, [&](absl::StatusOr<std::vector<client::SendReceipt>> r) {
        std::lock_guard<std::mutex> l(mu);
        if (!r.ok() || r->size() != 1) ++bad;
        ++done;
        cv.notify_all();
      });
    }
  }
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(
        cv.wait_for(l, std::chrono::seconds(60), [&] { return done == kConnections * kEach; }));
  }
  EXPECT_EQ(bad, 0);
  auto stats = admin_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->commitlog_flushed_offset(), stats->commitlog_max_offset());
  EXPECT_GE(stats->commitlog_durable_waits(), kConnections * kEach);
  EXPECT_GE(stats->commitlog_sync_rounds(), 1);
  EXPECT_LE(stats->commitlog_sync_rounds(), stats->commitlog_durable_waits());
  EXPECT_GE(stats->commitlog_syncs(), stats->commitlog_sync_rounds());
  // Acknowledged means fsynced: all of it is there after a kill -9.
  Restart(/*crash=*/true);
  auto after = admin_->Stats();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->commitlog_max_offset(), stats->commitlog_max_offset());
  auto topic = admin_->DescribeTopic("durable");
  ASSERT_TRUE(topic.ok()) << topic.status();
  int64_t immediate = 0;
  for (const auto& q : topic->queues()) immediate += q.max_offset() - q.min_offset();
  EXPECT_EQ(immediate, kConnections * kEach / 2);
}

// The client's read role moves between threads (leader/follower, client/connection.h): blocking
// callers read their own responses, the background thread reads for async ones. Many of both
// on one connection: every caller gets the answer to its own request.
TEST_F(BrokerIntegrationTest, SyncAndAsyncCallsShareOneConnection) {
  StartBroker({});
  CreateTopic("shared", proto::NORMAL, 1);
  Producer producer(broker_->Options());  // one connection for every thread below
  constexpr int kThreads = 4, kSyncEach = 150, kAsyncBatches = 60, kBatch = 5;
  std::vector<std::thread> threads;
  std::atomic<int> sync_bad{0}, async_bad{0}, async_done{0};
  std::mutex offsets_mu;
  std::set<int64_t> offsets;
  auto record = [&](const client::SendReceipt& r) {
    std::lock_guard<std::mutex> lock(offsets_mu);
    return offsets.insert(r.queue_offset.value()).second;
  };
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kSyncEach; ++i) {
        OutgoingMessage m;
        m.topic = "shared";
        m.body = "sync-" + std::to_string(t) + "-" + std::to_string(i);
        auto r = producer.Send(m);
        if (!r.ok() || r->topic != "shared" || !record(*r)) sync_bad.fetch_add(1);
      }
    });
  }
  threads.emplace_back([&] {
    for (int b = 0; b < kAsyncBatches; ++b) {
      std::vector<OutgoingMessage> batch;
      for (int i = 0; i < kBatch; ++i) {
        OutgoingMessage m;
        m.topic = "shared";
        m.body = "async-" + std::to_string(b) + "-" + std::to_string(i);
        batch.push_back(m);
      }
      producer.SendBatchAsync(batch, [&](absl::StatusOr<std::vector<client::SendReceipt>> r) {
        if (!r.ok() || r->size() != static_cast<size_t>(kBatch)) {
          async_bad.fetch_add(1);
        } else {
          for (const auto& one : *r) {
            if (!record(one)) async_bad.fetch_add(1);
          }
        }
        async_done.fetch_add(1);
      });
    }
  });
  for (auto& t : threads) t.join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (async_done.load() < kAsyncBatches && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(sync_bad.load(), 0);
  EXPECT_EQ(async_bad.load(), 0);
  ASSERT_EQ(async_done.load(), kAsyncBatches);
  // One queue: the offsets are exactly 0 .. n-1, each answered once.
  const size_t n = kThreads * kSyncEach + kAsyncBatches * kBatch;
  ASSERT_EQ(offsets.size(), n);
  EXPECT_EQ(*offsets.begin(), 0);
  EXPECT_EQ(*offsets.rbegin(), static_cast<int64_t>(n) - 1);
  // And the stored bodies are the ones sent, each once.
  SimpleConsumer consumer(broker_->Options(), "g");
  std::set<std::string> bodies;
  while (bodies.size() < n) {
    auto got = Receive(consumer, "shared", 1000, 30 * kSecond, 256);
    if (got.empty()) break;
    for (const auto& m : got) EXPECT_TRUE(bodies.insert(m.body).second) << m.body;
  }
  EXPECT_EQ(bodies.size(), n);
  EXPECT_EQ(bodies.count("sync-3-149"), 1u);
  EXPECT_EQ(bodies.count("async-59-4"), 1u);
}

// Nobody reads an idle connection, yet the broker going away must still mark it broken, so that
// the next call reconnects instead of failing on it (the background thread watches POLLRDHUP).
TEST_F(BrokerIntegrationTest, IdleConnectionNoticesTheBrokerLeaving) {
  StartBroker({});
  client::ConnectionHolder holder(broker_->Options());
  auto conn = holder.Get();
  ASSERT_TRUE(conn.ok()) << conn.status();
  proto::Request req;
  req.mutable_list_topics();
  ASSERT_TRUE((*conn)->Call(req, 5000).ok());
  EXPECT_FALSE((*conn)->broken());
  broker_->Kill();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(*conn)->broken() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_TRUE((*conn)->broken());
  auto after = (*conn)->Call(req, 5000);
  EXPECT_TRUE(absl::IsUnavailable(after.status())) << after.status();
}

// The broker stops (SIGTERM: it answers the open long polls, then closes) while synchronous
// calls hold the client's read role: once they have returned, the connection must be marked
// broken so that the next call reconnects. Found by a fresh-eyes pass: the background thread
// saw the close while a caller still held the role, and nobody marked it (1 round in 6).
TEST_F(BrokerIntegrationTest, StopDuringSyncLongPollsMarksTheConnectionBroken) {
  int not_broken = 0;
  for (int round = 0; round < 12; ++round) {
    // Without the gRPC endpoint the broker closes right after answering the polls: the close
    // then races with the callers' reads.
    StartBroker({"--grpc-port", "0"});
    if (round == 0) CreateTopic("empty", proto::NORMAL);
    client::ConnectionHolder holder(broker_->Options());
    auto conn = holder.Get();
    ASSERT_TRUE(conn.ok()) << conn.status();
    std::vector<std::thread> pollers;
    for (int i = 0; i < 1 + round % 4 * 2; ++i) {  // 1, 3, 5, 7 callers
      pollers.emplace_back([&] {
        proto::Request req;
        auto* r = req.mutable_receive();
        r->set_group("g");
        r->set_topic("empty");
        r->set_long_poll_ms(10'000);
        r->set_encoded_properties(true);
        (void)(*conn)->Call(req, 20'000);  // answered empty or cut off: either is fine here
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the polls reach the broker
    ASSERT_EQ(broker_->Stop(), 0);
    for (auto& t : pollers) t.join();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(*conn)->broken() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (!(*conn)->broken()) ++not_broken;
  }
  EXPECT_EQ(not_broken, 0) << "rounds where the connection stayed usable-looking after the broker left";
}

TEST_F(BrokerIntegrationTest, AdvanceClockRefusedWithoutManualClockFlag) {
  StartBroker({});
  auto r = admin_->AdvanceClock(kDay);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("--manual-clock"), absl::string_view::npos);
}

TEST_F(BrokerIntegrationTest, TopicAdminLifecycle) {
  StartBroker();
  CreateTopic("b", proto::FIFO, 3, kDay);
  CreateTopic("a", proto::DELAY, 8);
  proto::TopicConfig dup;
  dup.set_name("a");
  dup.set_type(proto::DELAY);
  EXPECT_EQ(admin_->CreateTopic(dup).status().code(), absl::StatusCode::kAlreadyExists);
  auto list = admin_->ListTopics();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name(), "a");
  EXPECT_EQ((*list)[0].max_delay_ms(), 3 * kDay);  // default
  proto::TopicConfig upd;
  upd.set_name("b");
  upd.set_queues(4);
  auto updated = admin_->UpdateTopic(upd);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->topic().queues(), 4);
  EXPECT_EQ(updated->queues_size(), 4);
  ASSERT_TRUE(admin_->DeleteTopic("b").ok());
  EXPECT_EQ(admin_->DescribeTopic("b").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(admin_->TimerCheckpoint().ok());
}

}  // namespace
}  // namespace tokimq
