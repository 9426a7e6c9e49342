// ConsumerService behaviour: leases, acks, renewals, retries, DLQ, filters, restart.
#include <gmock/gmock.h>

#include <thread>

#include "consumer/consumer_env.h"
#include "consumer/sql_filter.h"

namespace tokimq::testing {
namespace {

using ::testing::ElementsAre;

TEST_P(ConsumerTest, ReceiveThenAckRemovesTheMessageForGood) {
  Send("t", 0, "m0");
  Send("t", 0, "m1");
  Send("t", 0, "m2");
  auto got = Recv("g", "t", 10);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_THAT(Bodies(got), ElementsAre("m0", "m1", "m2"));
  EXPECT_EQ(got[0].delivery_attempt, 1);
  EXPECT_EQ(got[0].invisible_until_ms, clock_.NowMs() + 30'000);
  EXPECT_EQ(got[2].message.queue_offset.value(), 2);
  EXPECT_EQ(svc_->InFlight("g"), 3);
  for (const auto& m : got) EXPECT_TRUE(svc_->Ack("g", m.receipt_handle).ok());
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_TRUE(Recv("g", "t").empty());
  Advance(3'600'000);
  EXPECT_TRUE(Recv("g", "t").empty());
  EXPECT_EQ(svc_->DlqDepth("g"), 0);
}

TEST_P(ConsumerTest, ReceiveStopsAtTheByteBudgetButAlwaysHandsOutOneMessage) {
  for (int i = 0; i < 5; ++i) Send("t", 0, std::string(1000, static_cast<char>('a' + i)));
  for (int i = 0; i < 3; ++i) SendToGroup("f", 0, "g" + std::to_string(i), std::string(1000, 'f'));
  ReceiveRequest req;
  req.group = "g";
  req.topic = "t";
  req.max_messages = 16;
  // Two answers of ~2.1 KB (a ~1.1 KB record + 1 KiB of fields) fit, a third does not.
  req.max_bytes = 4600;
  std::vector<size_t> sizes;
  for (int i = 0; i < 3; ++i) {
    auto r = svc_->Receive(req);
    ASSERT_TRUE(r.ok()) << r.status();
    sizes.push_back(r->size());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));  // nothing skipped, nothing lost
  EXPECT_EQ(svc_->InFlight("g"), 5);
  // A budget below one record: one message per Receive, never none.
  req.group = "h";
  req.max_bytes = 10;
  auto one = svc_->Receive(req);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().message.body, std::string(1000, 'a'));
  // FIFO queues keep the budget too.
  req.group = "gf";
  req.topic = "f";
  req.max_bytes = 4600;
  auto fifo = svc_->Receive(req);
  ASSERT_TRUE(fifo.ok());
  EXPECT_EQ(fifo->size(), 2u);
  req.max_bytes = 0;  // no limit
  auto rest = svc_->Receive(req);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->size(), 1u);
}

TEST_P(ConsumerTest, ExpiredLeaseRedeliversWithAttemptTwoAfterBackoffNotBefore) {
  Send("t", 0, "m0");
  auto first = Recv("g", "t", 1, 30'000);
  ASSERT_EQ(first.size(), 1u);
  Advance(29'999);
  EXPECT_TRUE(Recv("g", "t").empty());
  EXPECT_EQ(svc_->InFlight("g"), 1);
  Advance(1);  // lease ends; the first backoff step is 10 s
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_TRUE(Recv("g", "t").empty());
  Advance(9'999);
  EXPECT_TRUE(Recv("g", "t").empty());
  Advance(1);
  auto again = Recv("g", "t");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].message.body, "m0");
  EXPECT_EQ(again[0].delivery_attempt, 2);
  EXPECT_EQ(again[0].message.properties.at(prop::kOriginalTopic), "t");
  // The first handle is dead: the delivery it names has expired.
  EXPECT_EQ(svc_->Ack("g", first[0].receipt_handle).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(svc_->Ack("g", again[0].receipt_handle).ok());
}

TEST_P(ConsumerTest, RenewExtendsTheLeaseAndRefusesTheOldHandle) {
  Send("t", 0, "m0");
  auto got = Recv("g", "t", 1, 30'000);
  ASSERT_EQ(got.size(), 1u);
  Advance(20'000);
  auto renewed = svc_->ChangeInvisibleDuration("g", got[0].receipt_handle, 60'000);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_NE(*renewed, got[0].receipt_handle);
  Advance(45'000);  // past the original lease (and its backoff), inside the renewed one
  EXPECT_TRUE(Recv("g", "t").empty());
  EXPECT_EQ(svc_->InFlight("g"), 1);
  EXPECT_EQ(svc_->Ack("g", got[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(svc_->ChangeInvisibleDuration("g", got[0].receipt_handle, 1000).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(svc_->Ack("g", *renewed).ok());
  Advance(3'600'000);
  EXPECT_TRUE(Recv("g", "t").empty());
}

TEST_P(ConsumerTest, RenewedLeaseExpiresAtItsNewDeadline) {
  Send("t", 0, "m0");
  auto got = Recv("g", "t", 1, 30'000);
  auto renewed = svc_->ChangeInvisibleDuration("g", got[0].receipt_handle, 60'000);
  ASSERT_TRUE(renewed.ok());
  Advance(59'999);
  EXPECT_EQ(svc_->InFlight("g"), 1);
  Advance(1);
  EXPECT_EQ(svc_->InFlight("g"), 0);
  Advance(10'000);
  auto again = Recv("g", "t");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].delivery_attempt, 2);
}

TEST_P(ConsumerTest, SecondAckOfTheSameDeliveryIsRefused) {
  Send("t", 0, "m0");
  auto got = Recv("g", "t");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(svc_->Ack("g", got[0].receipt_handle).ok());
  EXPECT_EQ(svc_->Ack("g", got[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(svc_->Nack("g", got[0].receipt_handle, 0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(svc_->ChangeInvisibleDuration("g", got[0].receipt_handle, 1000).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(ConsumerTest, AckBatchAcksEachDeliveryOnce) {
  for (int i = 0; i < 4; ++i) Send("orders", i, "o" + std::to_string(i));
  auto got = Recv("g", "orders", 4);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_TRUE(svc_->Ack("g", got[3].receipt_handle).ok());
  std::vector<std::string_view> handles = {got[0].receipt_handle, got[1].receipt_handle, "garbage",
                                      got[0].receipt_handle, got[3].receipt_handle,
                                      got[2].receipt_handle};
  auto results = svc_->AckBatch("g", handles);
  ASSERT_EQ(results.size(), handles.size());
  EXPECT_TRUE(results[0].ok());
  EXPECT_TRUE(results[1].ok());
  EXPECT_EQ(results[2].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results[3].code(), absl::StatusCode::kFailedPrecondition);  // repeated in batch
  EXPECT_EQ(results[4].code(), absl::StatusCode::kFailedPrecondition);  // acked before
  EXPECT_TRUE(results[5].ok());
  EXPECT_EQ(svc_->InFlight("g"), 0);
  Advance(3'600'000);
  EXPECT_TRUE(Recv("g", "orders").empty());
}

TEST_P(ConsumerTest, MaxAttemptsMovesTheMessageToTheDlq) {
  GroupPolicy policy;
  policy.max_attempts = 3;
  policy.backoff_ms = {1'000};
  svc_->SetGroupPolicy("g", policy);
  Send("t", 0, "poison");
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto got = Recv("g", "t", 1, 5'000);
    ASSERT_EQ(got.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(got[0].delivery_attempt, attempt);
    Advance(5'000);   // lease expires
    Advance(1'000);   // backoff
  }
  EXPECT_TRUE(Recv("g", "t").empty());
  EXPECT_EQ(svc_->DlqDepth("g"), 1);
  EXPECT_EQ(svc_->InFlight("g"), 0);
  // The DLQ is an ordinary (implicit one-queue) topic another group can read.
  auto dead = Recv("ops", "%DLQ%g");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].message.body, "poison");
  EXPECT_EQ(dead[0].message.properties.at(prop::kDeliveryAttempt), "3");
  EXPECT_EQ(dead[0].message.properties.at(prop::kOriginalTopic), "t");
}

TEST_P(ConsumerTest, NackWithDelayRedeliversAfterExactlyThatDelay) {
  Send("t", 0, "m0");
  auto got = Recv("g", "t");
  ASSERT_TRUE(svc_->Nack("g", got[0].receipt_handle, 5'000).ok());
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_EQ(svc_->Ack("g", got[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  Advance(4'999);
  EXPECT_TRUE(Recv("g", "t").empty());
  Advance(1);
  auto again = Recv("g", "t");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].delivery_attempt, 2);
  // Without a delay the group's backoff applies: attempt 2 failed -> 30 s.
  ASSERT_TRUE(svc_->Nack("g", again[0].receipt_handle, std::nullopt).ok());
  Advance(29'999);
  EXPECT_TRUE(Recv("g", "t").empty());
  Advance(1);
  auto third = Recv("g", "t");
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].delivery_attempt, 3);
}

TEST_P(ConsumerTest, NackWithZeroDelayIsReceivableAtOnce) {
  Send("t", 0, "m0");
  auto got = Recv("g", "t");
  ASSERT_TRUE(svc_->Nack("g", got[0].receipt_handle, 0).ok());
  auto again = Recv("g", "t");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].delivery_attempt, 2);
}

TEST_P(ConsumerTest, TagFilterHandsOutOnlyMatchingTags) {
  Send("t", 0, "a1", "a");
  Send("t", 0, "b1", "b");
  Send("t", 0, "c1", "c");
  Send("t", 0, "none");
  Send("t", 0, "a2", "a");
  EXPECT_THAT(Bodies(Recv("g", "t", 16, 30'000, "a || c")), ElementsAre("a1", "c1", "a2"));
  EXPECT_THAT(Bodies(Recv("g2", "t", 16, 30'000, "*")),
              ElementsAre("a1", "b1", "c1", "none", "a2"));
  EXPECT_THAT(Bodies(Recv("g3", "t", 16, 30'000, "b")), ElementsAre("b1"));
  EXPECT_TRUE(Recv("g3", "t", 16, 30'000, "b").empty());
}

TEST_P(ConsumerTest, SqlFilterHandsOutOnlyMatchingPropertiesAndSkipsTheRest) {
  auto send = [&](const std::string& body, std::map<std::string, std::string> props) {
    Message m;
    m.topic = "t";
    m.queue_id = 0;
    m.body = body;
    m.born_ms = clock_.NowMs();
    m.properties = std::move(props);
    ASSERT_TRUE(store()->Put(std::move(m)).ok());
  };
  send("eu-big", {{"region", "eu"}, {"amount", "250"}});
  send("eu-small", {{"region", "eu"}, {"amount", "5"}});
  send("us-big", {{"region", "us"}, {"amount", "900"}});
  send("no-amount", {{"region", "eu"}});
  send("bad-amount", {{"region", "eu"}, {"amount", "lots"}});
  send("eu-tagged", {{"region", "eu"}, {"amount", "101"}, {prop::kTag, "vip"}});
  auto parsed = consumer::SqlFilter::Parse("region = 'eu' AND amount > 100");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ReceiveRequest req;
  req.group = "g";
  req.topic = "t";
  req.sql_filter = std::make_shared<const consumer::SqlFilter>(*parsed);
  auto got = svc_->Receive(req);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(Bodies(*got), ElementsAre("eu-big", "eu-tagged"));
  // The messages it skipped count as consumed for the group: nothing comes back for it.
  auto again = svc_->Receive(req);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  // TAGS is a property like the others, and the tag filter still applies with SQL.
  req.group = "g2";
  req.tag_filter = "vip";
  req.sql_filter = std::make_shared<const consumer::SqlFilter>(
      *consumer::SqlFilter::Parse("amount IS NOT NULL AND TAGS = 'vip'"));
  got = svc_->Receive(req);
  ASSERT_TRUE(got.ok());
  EXPECT_THAT(Bodies(*got), ElementsAre("eu-tagged"));
}

TEST_P(ConsumerTest, RestartKeepsProgressLeasesAndPendingRetries) {
  for (int i = 0; i < 5; ++i) Send("t", 0, "m" + std::to_string(i));
  auto got = Recv("g", "t", 3, 30'000);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_TRUE(svc_->Ack("g", got[0].receipt_handle).ok());
  ASSERT_TRUE(svc_->Nack("g", got[1].receipt_handle, 60'000).ok());  // pending retry
  // m2 stays leased across the restart.
  Restart();
  EXPECT_EQ(svc_->InFlight("g"), 1);
  EXPECT_EQ(svc_->Ack("g", got[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  auto rest = Recv("g", "t", 10, 30'000);
  EXPECT_THAT(Bodies(rest), ElementsAre("m3", "m4"));
  for (const auto& m : rest) ASSERT_TRUE(svc_->Ack("g", m.receipt_handle).ok());
  // m2's lease still expires on time (30 s after it was taken) and m2 comes back after 10 s.
  Advance(30'000);
  EXPECT_EQ(svc_->InFlight("g"), 0);
  Restart();
  Advance(10'000);
  EXPECT_THAT(Bodies(Recv("g", "t")), ElementsAre("m2"));
  Advance(20'000);  // 60 s after the nack
  auto retry = Recv("g", "t");
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].message.body, "m1");
  EXPECT_EQ(retry[0].delivery_attempt, 2);
}

TEST_P(ConsumerTest, HandleIssuedBeforeRestartAcksAfterIt) {
  Send("t", 0, "m0");
  auto got = Recv("g", "t");
  Restart();
  EXPECT_TRUE(svc_->Ack("g", got[0].receipt_handle).ok());
  EXPECT_EQ(svc_->InFlight("g"), 0);
}

TEST_P(ConsumerTest, ForgedOrGarbledHandlesAreInvalidArguments) {
  Send("t", 0, "m0");
  auto got = Recv("g", "t");
  std::string h = got[0].receipt_handle;
  EXPECT_EQ(svc_->Ack("g", "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(svc_->Ack("g", "not a handle").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(svc_->Ack("g", std::string(100'000, 'a')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(svc_->Ack("g", h.substr(0, h.size() - 2)).code(), absl::StatusCode::kInvalidArgument);
  for (size_t i = 0; i < h.size(); i += 7) {
    std::string bad = h;
    bad[i] = bad[i] == '0' ? '1' : '0';
    EXPECT_EQ(svc_->Ack("g", bad).code(), absl::StatusCode::kInvalidArgument) << i;
  }
  EXPECT_EQ(svc_->Ack("other", h).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(svc_->Ack("g", h).ok());
}

TEST_P(ConsumerTest, TwoConsumersOfOneGroupNeverShareALeasedMessage) {
  constexpr int kMessages = 200;
  for (int i = 0; i < kMessages; ++i) Send("orders", i % 4, "o" + std::to_string(i));
  std::vector<std::string> seen[2];
  auto consume = [&](int c) {
    while (true) {
      auto got = Recv("g", "orders", 7, 60'000);
      if (got.empty()) return;
      for (const auto& m : got) seen[c].push_back(m.message.body);
    }
  };
  std::thread t0(consume, 0), t1(consume, 1);
  t0.join();
  t1.join();
  std::set<std::string> all;
  for (const auto& s : seen) all.insert(s.begin(), s.end());
  EXPECT_EQ(seen[0].size() + seen[1].size(), static_cast<size_t>(kMessages));
  EXPECT_EQ(all.size(), static_cast<size_t>(kMessages));
  EXPECT_EQ(svc_->InFlight("g"), kMessages);
}

TEST_P(ConsumerTest, EveryGroupGetsEveryMessage) {
  for (int i = 0; i < 20; ++i) Send("orders", i % 4, "o" + std::to_string(i));
  for (const char* g : {"g1", "g2"}) {
    std::set<std::string> bodies;
    for (const auto& m : Recv(g, "orders", 100)) bodies.insert(m.message.body);
    EXPECT_EQ(bodies.size(), 20u) << g;
  }
}

TEST_P(ConsumerTest, RetriesOfOneTopicStayWithThatTopic) {
  Send("a", 0, "from-a");
  Send("b", 0, "from-b");
  auto a = Recv("g", "a");
  ASSERT_TRUE(svc_->Nack("g", a[0].receipt_handle, 0).ok());
  auto b = Recv("g", "b");
  EXPECT_THAT(Bodies(b), ElementsAre("from-b"));
  auto a2 = Recv("g", "a");
  ASSERT_EQ(a2.size(), 1u);
  EXPECT_EQ(a2[0].message.body, "from-a");
  EXPECT_EQ(a2[0].delivery_attempt, 2);
  EXPECT_TRUE(svc_->Ack("g", a2[0].receipt_handle).ok());
}

TEST_P(ConsumerTest, TtlSendsOldUnackedMessagesToTheDlqInsteadOfRetrying) {
  GroupPolicy policy;
  policy.ttl_ms = 60'000;
  svc_->SetGroupPolicy("g", policy);
  Send("t", 0, "m0");
  ASSERT_EQ(Recv("g", "t", 1, 30'000).size(), 1u);
  Advance(30'000);  // age 30 s < TTL: retry after 10 s
  Advance(10'000);
  auto again = Recv("g", "t", 1, 30'000);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].delivery_attempt, 2);
  Advance(30'000);  // age 70 s >= TTL
  EXPECT_EQ(svc_->DlqDepth("g"), 1);
  Advance(3'600'000);
  EXPECT_TRUE(Recv("g", "t").empty());
}

TEST_P(ConsumerTest, TtlAlsoAppliesToMessagesNobodyReceivedInTime) {
  GroupPolicy policy;
  policy.ttl_ms = 60'000;
  svc_->SetGroupPolicy("g", policy);
  Send("t", 0, "stale");
  Advance(60'000);
  Send("t", 0, "fresh");
  EXPECT_THAT(Bodies(Recv("g", "t")), ElementsAre("fresh"));
  EXPECT_EQ(svc_->DlqDepth("g"), 1);
  auto dead = Recv("ops", "%DLQ%g");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].message.body, "stale");
  EXPECT_EQ(dead[0].message.properties.at(prop::kDeliveryAttempt), "0");
}

TEST_P(ConsumerTest, PolicySurvivesRestart) {
  GroupPolicy policy;
  policy.max_attempts = 1;
  svc_->SetGroupPolicy("g", policy);
  Restart();
  Send("t", 0, "m0");
  auto got = Recv("g", "t");
  ASSERT_TRUE(svc_->Nack("g", got[0].receipt_handle, 0).ok());
  EXPECT_EQ(svc_->DlqDepth("g"), 1);
}

TEST_P(ConsumerTest, LongPollWakesWhenAMessageArrives) {
  std::vector<ReceivedMessage> got;
  std::thread poller([&] {
    ReceiveRequest req;
    req.group = "g";
    req.topic = "t";
    req.long_poll_ms = 60'000;  // real-time bound; the clock is manual
    auto r = svc_->Receive(req);
    ASSERT_TRUE(r.ok());
    got = std::move(*r);
  });
  Send("t", 0, "late");
  poller.join();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message.body, "late");
}

TEST_P(ConsumerTest, LongPollReturnsEmptyWhenNothingArrives) {
  ReceiveRequest req;
  req.group = "g";
  req.topic = "t";
  req.long_poll_ms = 20;
  auto r = svc_->Receive(req);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST_P(ConsumerTest, BadRequestsAreRefused) {
  ReceiveRequest req;
  req.group = "g";
  req.topic = "nope";
  EXPECT_EQ(svc_->Receive(req).status().code(), absl::StatusCode::kNotFound);
  req.topic = "t";
  req.max_messages = 0;
  EXPECT_EQ(svc_->Receive(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.max_messages = 1;
  req.invisible_ms = 0;
  EXPECT_EQ(svc_->Receive(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.invisible_ms = 1000;
  req.group = "a/b";
  EXPECT_EQ(svc_->Receive(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.group = "";
  EXPECT_EQ(svc_->Receive(req).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(ConsumerTest, CorruptGroupStateRefusesToOpen) {
  Send("t", 0, "m0");
  ASSERT_EQ(Recv("g", "t").size(), 1u);
  CloseAll();
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.Join("meta"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    std::string lease_key;
    for (it->Seek("group/g/b/"); it->Valid(); it->Next()) {
      lease_key = it->key().ToString();
      break;
    }
    ASSERT_FALSE(lease_key.empty());
    std::string v;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), lease_key, &v).ok());
    v[3] ^= 1;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), lease_key, v).ok());
  }
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.Join("meta"), &raw).ok());
  db_.reset(raw);
  ConsumerServiceDeps deps;
  deps.clock = &clock_;
  deps.store = store();
  deps.timers = timers();
  deps.db = db_.get();
  deps.queue_count = [](const std::string&) -> absl::StatusOr<int> { return 1; };
  auto svc = NewConsumerService(std::move(deps));
  EXPECT_EQ(svc.status().code(), absl::StatusCode::kDataLoss);
}

INSTANTIATE_TEST_SUITE_P(Stores, ConsumerTest, ::testing::Values("fake", "real"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tokimq::testing
