// OrderedConsumer through the real broker (manual clock): the ordering seed's worked example end
// to end, random batches with failure injection checked against the ordering promises and
// exactly-once application, a slow key that holds no other key, and lease renewal while a key
// runs. Waits are bounded condition-variable waits that only guard against a hang.
#include "client/ordering/ordered_consumer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "broker_process.h"
#include "client/admin.h"
#include "client/ordering/properties.h"
#include "client/producer.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::OutgoingMessage;
using ordering::BatchReport;
using ordering::EventAtomicOrdering;
using ordering::EventTypeTag;
using ordering::HandlerCall;
using ordering::OrderedConsumer;
using ordering::OrderedConsumerOptions;

// An event: its sequence number within its key and an amount (deposits are summed).
struct Ev {
  int seq = 0;
  int64_t amount = 0;
};

absl::StatusOr<Ev> DecodeEv(const client::ReceivedMessage& m) {
  Ev e;
  const size_t colon = m.body.find(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("bad body " + m.body);
  e.seq = std::stoi(m.body.substr(0, colon));
  e.amount = std::stoll(m.body.substr(colon + 1));
  return e;
}

class OrderedConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<testing::BrokerProcess>(dir_.Join("data"));
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    admin_ = std::make_unique<client::AdminClient>(broker_->Options());
    producer_ = std::make_unique<client::Producer>(broker_->Options());
    proto::TopicConfig t;
    t.set_name("acct");
    t.set_type(proto::FIFO);
    t.set_queues(2);
    ASSERT_TRUE(admin_->CreateTopic(t).ok());
  }
  // Publishes one event of `group` with the ordering header (tag, ordering).
  void Publish(const std::string& group, int seq, uint16_t tag, EventAtomicOrdering ord,
               int64_t amount = 0) {
    OutgoingMessage m;
    m.topic = "acct";
    m.message_group = group;
    m.body = std::to_string(seq) + ":" + std::to_string(amount);
    ordering::EncodeOrderingProperties({ordering::HashOrderingKey(group), EventTypeTag{tag}, ord},
                                       &m.properties);
    auto r = producer_->Send(m);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  int64_t InFlight(const std::string& group) {
    auto stats = admin_->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return -1;
    for (const auto& g : stats->groups()) {
      if (g.group() == group) return g.in_flight();
    }
    return 0;
  }
  OrderedConsumerOptions Options() {
    OrderedConsumerOptions o;
    o.topic = "acct";
    o.max_messages = 64;
    o.max_per_group = 16;
    o.invisible_ms = 10'000;
    o.long_poll_ms = 200;
    o.renew_every_ms = 3'600'000;  // tests renew by hand (RenewNow)
    o.nack_delay_ms = 0;
    o.executor.threads = 4;
    o.executor.max_batch = 8;
    return o;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::BrokerProcess> broker_;
  std::unique_ptr<client::AdminClient> admin_;
  std::unique_ptr<client::Producer> producer_;
};

constexpr uint16_t kOpened = 1, kDeposited = 2, kWithdrawn = 3, kClosed = 4;

TEST_F(OrderedConsumerTest, WorkedExampleFromTheSeedEndToEnd) {
  using O = EventAtomicOrdering;
  Publish("42", 0, kOpened, O::Acquire);
  Publish("42", 1, kDeposited, O::Relaxed, 100);
  Publish("7", 2, kDeposited, O::Relaxed, 5);
  Publish("42", 3, kWithdrawn, O::Relaxed, 30);
  Publish("42", 4, kDeposited, O::Relaxed, 20);
  Publish("42", 5, kClosed, O::Release);
  Publish("42", 6, kOpened, O::Acquire);
  Publish("42", 7, kDeposited, O::Relaxed, 1);

  std::mutex mu;
  std::vector<std::string> calls;  // "key/tag:seq+seq..." in call order
  client::SimpleConsumer sc(broker_->Options(), "g");
  OrderedConsumer<Ev> oc(&sc, Options(), DecodeEv, [&](const HandlerCall<Ev>& call) {
    std::string s = (call.key == ordering::HashOrderingKey("42") ? "42/" : "7/") +
                    std::to_string(static_cast<int>(call.tag)) + ":";
    for (const auto& e : call.events)
      s += std::to_string(e.event.seq) + "=" + std::to_string(e.event.amount) + ",";
    std::lock_guard<std::mutex> l(mu);
    calls.push_back(s);
    return absl::OkStatus();
  });
  oc.RegisterType(EventTypeTag{kDeposited}, {[](Ev& acc, const Ev& next) {
                    acc.amount += next.amount;
                    return true;
                  }});
  auto report = oc.PollOnce();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->records, 8u);
  EXPECT_EQ(report->keys, 2u);
  // 42: seg{head[0] body[1,4][3] tail[5]} seg{head[6] body[7]}; 7: seg{body[2]}.
  EXPECT_EQ(report->handler_calls, 7u);
  EXPECT_EQ(report->events, 7u);  // deposits 1 and 4 reduced into one event
  EXPECT_EQ(report->acked, 8u);
  EXPECT_EQ(report->nacked, 0u);
  EXPECT_EQ(report->failed_keys, 0u);
  std::vector<std::string> of42;
  for (const auto& c : calls) {
    if (c.rfind("42/", 0) == 0) of42.push_back(c);
  }
  ASSERT_EQ(of42.size(), 6u);
  EXPECT_EQ(of42[0], "42/1:0=0,");
  // Body runs run concurrently: either order.
  std::set<std::string> body{of42[1], of42[2]};
  EXPECT_EQ(body, (std::set<std::string>{"42/2:1=120,", "42/3:3=30,"}));
  EXPECT_EQ(of42[3], "42/4:5=0,");
  EXPECT_EQ(of42[4], "42/1:6=0,");
  EXPECT_EQ(of42[5], "42/2:7=1,");
  EXPECT_EQ(InFlight("g"), 0);
}

// Random batches over 12 keys with random types and orderings; the handler fails about 15 % of
// its calls (applying nothing). Checks: every event applied exactly once, and in every key
// the applied order honours each promise of the model (same type in log order; an Acquire or
// AcqRel before everything later; a Release or AcqRel after everything earlier).
TEST_F(OrderedConsumerTest, RandomPlansWithFailuresKeepThePromisesThroughTheBroker) {
  constexpr int kKeys = 12, kPerKey = 30;
  std::mt19937 rng(23);
  struct Sent {
    uint16_t tag;
    EventAtomicOrdering ord;
  };
  std::vector<std::vector<Sent>> log(kKeys);
  std::vector<OutgoingMessage> batch;
  std::vector<int> next(kKeys, 0);
  for (int n = 0; n < kKeys * kPerKey; ++n) {
    int k = static_cast<int>(rng() % kKeys);
    while (next[k] == kPerKey) k = (k + 1) % kKeys;
    const uint16_t tag = static_cast<uint16_t>(1 + rng() % 3);
    const unsigned r = rng() % 10;
    const EventAtomicOrdering ord = r < 6   ? EventAtomicOrdering::Relaxed
                                    : r < 8 ? EventAtomicOrdering::Acquire
                                    : r < 9 ? EventAtomicOrdering::Release
                                            : EventAtomicOrdering::AcqRel;
    log[k].push_back({tag, ord});
    Publish("key" + std::to_string(k), next[k]++, tag, ord);
  }

  std::mutex mu;
  std::mt19937 fail_rng(5);
  // applied[k][seq] = logical time of application (0: not applied).
  std::vector<std::vector<int>> applied(kKeys, std::vector<int>(kPerKey, 0));
  int clock = 0;
  int duplicates = 0;
  std::map<uint64_t, int> key_index;
  for (int k = 0; k < kKeys; ++k)
    key_index[ordering::HashOrderingKey("key" + std::to_string(k))] = k;
  client::SimpleConsumer sc(broker_->Options(), "g");
  OrderedConsumerOptions o = Options();
  o.max_per_group = 1 + static_cast<int>(rng() % 8);
  OrderedConsumer<Ev> oc(&sc, o, DecodeEv, [&](const HandlerCall<Ev>& call) {
    std::lock_guard<std::mutex> l(mu);
    if (fail_rng() % 100 < 15) return absl::UnavailableError("injected");
    const int k = key_index.at(call.key);
    for (const auto& e : call.events) {  // in log order within a call
      if (applied[k][e.event.seq] != 0) ++duplicates;
      applied[k][e.event.seq] = ++clock;
    }
    return absl::OkStatus();
  });
  size_t failures = 0, nacks = 0;
  for (int round = 0; round < 2'000; ++round) {
    bool all = true;
    for (int k = 0; k < kKeys && all; ++k) {
      for (int s = 0; s < kPerKey; ++s) all = all && applied[k][s] != 0;
    }
    if (all) break;
    auto report = oc.PollOnce();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->stale_acks, 0u);
    failures += report->failed_keys;
    nacks += report->nacked;
  }
  EXPECT_GT(failures, 5u);
  EXPECT_EQ(nacks, failures);  // one NACK per failed key (the key is the group)
  EXPECT_EQ(duplicates, 0);
  for (int k = 0; k < kKeys; ++k) {
    for (int j = 0; j < kPerKey; ++j) {
      ASSERT_NE(applied[k][j], 0) << "key " << k << " event " << j << " never applied";
      for (int i = 0; i < j; ++i) {
        const Sent& a = log[k][i];
        const Sent& b = log[k][j];
        const bool ordered = a.tag == b.tag || a.ord == EventAtomicOrdering::Acquire ||
                             a.ord == EventAtomicOrdering::AcqRel ||
                             b.ord == EventAtomicOrdering::Release ||
                             b.ord == EventAtomicOrdering::AcqRel;
        if (ordered) {
          EXPECT_LT(applied[k][i], applied[k][j]) << "key " << k << ": " << i << " vs " << j;
        }
      }
    }
  }
  EXPECT_EQ(InFlight("g"), 0);
}

// A gate a handler blocks on until the test opens it (bounded: a hang fails the test).
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    entered_ = true;
    cv_.notify_all();
    ASSERT_TRUE(cv_.wait_for(l, std::chrono::seconds(60), [&] { return open_; }));
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(60), [&] { return entered_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  bool entered_ = false;
};

TEST_F(OrderedConsumerTest, SlowKeyHoldsNoOtherKeyAndItsLeasesAreRenewed) {
  using O = EventAtomicOrdering;
  Publish("slow", 0, kOpened, O::Acquire);
  Publish("slow", 1, kDeposited, O::Relaxed, 1);
  Publish("fast", 0, kOpened, O::Acquire);
  Gate gate;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> fast_seen;
  client::SimpleConsumer sc(broker_->Options(), "g");
  OrderedConsumer<Ev> oc(&sc, Options(), DecodeEv, [&](const HandlerCall<Ev>& call) {
    if (call.key == ordering::HashOrderingKey("slow")) {
      gate.Wait();
      return absl::OkStatus();
    }
    std::lock_guard<std::mutex> l(mu);
    for (const auto& e : call.events) fast_seen.push_back(e.event.seq);
    cv.notify_all();
    return absl::OkStatus();
  });
  std::vector<BatchReport> reports;
  oc.Start([&](const BatchReport& r) {
    std::lock_guard<std::mutex> l(mu);
    reports.push_back(r);
    cv.notify_all();
  });
  ASSERT_TRUE(gate.WaitEntered());
  // "fast" was in the slow key's batch; it was ACKed when its key finished, so its next event
  // goes out to the other poller while "slow" still runs.
  Publish("fast", 1, kDeposited, O::Relaxed, 2);
  {
    // The other poller's batch (fast 1) is settled while the slow key still runs.
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] { return reports.size() == 1; }));
    EXPECT_EQ(reports[0].records, 1u);
    EXPECT_EQ(reports[0].acked, 1u);
  }
  EXPECT_EQ(fast_seen, (std::vector<int>{0, 1}));
  // The slow key's leases (10 s) are renewed; the broker's clock passes their first end.
  ASSERT_TRUE(admin_->AdvanceClock(8'000).ok());
  EXPECT_EQ(oc.RenewNow(), 2u);
  ASSERT_TRUE(admin_->AdvanceClock(8'000).ok());
  EXPECT_EQ(InFlight("g"), 2);  // still leased: nothing expired
  gate.Open();
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] {
      size_t records = 0;
      for (const auto& r : reports) records += r.acked;
      return records == 4;
    }));
  }
  oc.Stop();
  size_t stale = 0, renewals = 0;
  for (const auto& r : reports) {
    stale += r.stale_acks;
    renewals += r.renewals;
  }
  EXPECT_EQ(stale, 0u);
  EXPECT_EQ(renewals, 2u);
  EXPECT_EQ(InFlight("g"), 0);
}

}  // namespace
}  // namespace tokimq
