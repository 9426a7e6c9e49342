// ConsumerService: the delivery order of a consumer group (RocketMQ 5's consumeMessageOrderly;
// docs/ordering.md "Delivery order of a consumer group"). Only an Orderly group consumes a FIFO
// topic in message-group order; a Concurrently group consumes it like any other topic.
#include <gmock/gmock.h>

#include "consumer/consumer_env.h"

namespace tokimq::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<ReceivedMessage> RecvDefault(ConsumerService* svc, const std::string& group,
                                         bool orderly_by_default) {
  ReceiveRequest req;
  req.group = group;
  req.topic = "f";
  req.max_messages = 16;
  req.invisible_ms = 10'000;
  req.orderly_by_default = orderly_by_default;
  auto r = svc->Receive(req);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : std::vector<ReceivedMessage>{};
}

TEST_P(ConsumerTest, ConcurrentlyGroupGetsEveryMessageOfAMessageGroupAtOnce) {
  group_orderly_["conc"] = false;
  group_orderly_["ord"] = true;
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  SendToGroup("f", 0, "B", "b1");
  // a2 while a1 is leased: what the official client's FIFO test expects of a plain group.
  EXPECT_THAT(Bodies(Recv("conc", "f")), ElementsAre("a1", "a2", "b1"));
  EXPECT_EQ(svc_->InFlight("conc"), 3);
  EXPECT_EQ(svc_->Parked("conc"), 0);
  EXPECT_THAT(Bodies(Recv("ord", "f")), ElementsAre("a1", "b1"));
  EXPECT_EQ(svc_->Parked("ord"), 1);  // a2 behind a1
}

TEST_P(ConsumerTest, WithoutAStoredOrderTheRequestsDefaultDecides) {
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  // The RocketMQ endpoint's default (Concurrently) and the native one (Orderly).
  EXPECT_THAT(Bodies(RecvDefault(svc_.get(), "rmq", false)), ElementsAre("a1", "a2"));
  EXPECT_THAT(Bodies(RecvDefault(svc_.get(), "native", true)), ElementsAre("a1"));
  // A stored order wins over the request's default, either way.
  group_orderly_["stored_ord"] = true;
  group_orderly_["stored_conc"] = false;
  EXPECT_THAT(Bodies(RecvDefault(svc_.get(), "stored_ord", false)), ElementsAre("a1"));
  EXPECT_THAT(Bodies(RecvDefault(svc_.get(), "stored_conc", true)), ElementsAre("a1", "a2"));
}

TEST_P(ConsumerTest, ConcurrentlyGroupOnAFifoTopicRetriesLikeANormalTopic) {
  group_orderly_["conc"] = false;
  GroupPolicy policy;
  policy.backoff_ms = {1'000};
  svc_->SetGroupPolicy("conc", policy);
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  auto got = Recv("conc", "f", 16, 5'000);
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "a2"));
  ASSERT_TRUE(svc_->Ack("conc", got[1].receipt_handle).ok());  // a2 acked before a1
  Advance(5'000);  // a1's lease ends: a retry copy waits the 1 s backoff
  EXPECT_THAT(Bodies(Recv("conc", "f")), IsEmpty());
  Advance(1'000);
  auto again = Recv("conc", "f");
  ASSERT_THAT(Bodies(again), ElementsAre("a1"));
  EXPECT_EQ(again[0].delivery_attempt, 2);
  ASSERT_TRUE(svc_->Ack("conc", again[0].receipt_handle).ok());
  EXPECT_THAT(Bodies(Recv("conc", "f")), IsEmpty());
  EXPECT_EQ(svc_->InFlight("conc"), 0);
}

TEST_P(ConsumerTest, SwitchingAGroupToOrderlyOrdersItsNextReceives) {
  group_orderly_["g"] = false;
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  auto got = Recv("g", "f");
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "a2"));
  for (const auto& m : got) ASSERT_TRUE(svc_->Ack("g", m.receipt_handle).ok());
  group_orderly_["g"] = true;  // `tokimq group update --orderly`
  SendToGroup("f", 0, "A", "a3");
  SendToGroup("f", 0, "A", "a4");
  auto ordered = Recv("g", "f");
  ASSERT_THAT(Bodies(ordered), ElementsAre("a3"));
  EXPECT_THAT(Bodies(Recv("g", "f")), IsEmpty());
  ASSERT_TRUE(svc_->Ack("g", ordered[0].receipt_handle).ok());
  EXPECT_THAT(Bodies(Recv("g", "f")), ElementsAre("a4"));
}

}  // namespace
}  // namespace tokimq::testing
