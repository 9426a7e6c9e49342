// ConsumerService on FIFO topics: message groups handed out one at a time in queue order,
// retries in place, DLQ unblocking, delayed messages, restart (docs/ordering.md "FIFO topics").
#include <gmock/gmock.h>

#include <random>

#include "consumer/consumer_env.h"

namespace tokimq::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST_P(ConsumerTest, FifoHandsOutOneMessagePerGroupInQueueOrder) {
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "B", "b1");
  SendToGroup("f", 0, "A", "a2");
  SendToGroup("f", 0, "B", "b2");
  SendToGroup("f", 0, "A", "a3");
  SendToGroup("f", 0, "C", "c1");
  auto first = Recv("g", "f", 16);
  ASSERT_THAT(Bodies(first), ElementsAre("a1", "b1", "c1"));
  EXPECT_EQ(svc_->InFlight("g"), 3);
  // Every group has a message leased: nothing more, however often we ask.
  EXPECT_THAT(Bodies(Recv("g", "f", 16)), IsEmpty());
  ASSERT_TRUE(svc_->Ack("g", first[0].receipt_handle).ok());  // a1
  auto second = Recv("g", "f", 16);
  ASSERT_THAT(Bodies(second), ElementsAre("a2"));
  ASSERT_TRUE(svc_->Ack("g", first[1].receipt_handle).ok());  // b1
  ASSERT_TRUE(svc_->Ack("g", second[0].receipt_handle).ok());  // a2
  auto third = Recv("g", "f", 16);
  ASSERT_THAT(Bodies(third), ElementsAre("b2", "a3"));  // queue order
  EXPECT_EQ(third[0].delivery_attempt, 1);
  EXPECT_EQ(svc_->InFlight("g"), 3);  // c1, a3, b2
  // Another consumer group has its own blocking.
  EXPECT_THAT(Bodies(Recv("other", "f", 16)), ElementsAre("a1", "b1", "c1"));
}

TEST_P(ConsumerTest, FifoExpiredLeaseRetriesInPlaceAndKeepsTheGroupBlocked) {
  GroupPolicy policy;
  policy.backoff_ms = {1'000};
  svc_->SetGroupPolicy("g", policy);
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  SendToGroup("f", 0, "B", "b1");
  auto got = Recv("g", "f", 16, 5'000);
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "b1"));
  EXPECT_EQ(svc_->Parked("g"), 1);  // a2, behind a1
  ASSERT_TRUE(svc_->Ack("g", got[1].receipt_handle).ok());
  Advance(5'000);  // a1's lease ends; its redelivery waits the 1 s backoff
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_EQ(svc_->Parked("g"), 2);  // a1 waiting for its redelivery, a2 behind it
  EXPECT_EQ(svc_->Parked("other"), 0);
  EXPECT_THAT(Bodies(Recv("g", "f", 16)), IsEmpty()) << "a2 must not overtake a1";
  Advance(999);
  EXPECT_THAT(Bodies(Recv("g", "f", 16)), IsEmpty());
  Advance(1);
  auto again = Recv("g", "f", 16, 5'000);
  ASSERT_THAT(Bodies(again), ElementsAre("a1"));
  EXPECT_EQ(again[0].delivery_attempt, 2);
  EXPECT_EQ(again[0].message.queue_offset.value(), 0);  // the original, not a retry-topic copy
  EXPECT_EQ(again[0].message.topic, "f");
  EXPECT_EQ(svc_->Ack("g", got[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(svc_->Ack("g", again[0].receipt_handle).ok());
  auto next = Recv("g", "f", 16);
  ASSERT_THAT(Bodies(next), ElementsAre("a2"));
  EXPECT_EQ(next[0].delivery_attempt, 1);
}

TEST_P(ConsumerTest, FifoNackRedeliversTheSameMessageBeforeTheRestOfItsGroup) {
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  auto got = Recv("g", "f");
  ASSERT_THAT(Bodies(got), ElementsAre("a1"));
  ASSERT_TRUE(svc_->Nack("g", got[0].receipt_handle, 0).ok());
  auto again = Recv("g", "f");
  ASSERT_THAT(Bodies(again), ElementsAre("a1"));
  EXPECT_EQ(again[0].delivery_attempt, 2);
  ASSERT_TRUE(svc_->Nack("g", again[0].receipt_handle, 2'000).ok());
  Advance(1'999);
  EXPECT_THAT(Bodies(Recv("g", "f")), IsEmpty());
  Advance(1);
  auto third = Recv("g", "f");
  ASSERT_THAT(Bodies(third), ElementsAre("a1"));
  EXPECT_EQ(third[0].delivery_attempt, 3);
}

TEST_P(ConsumerTest, FifoGroupWhoseHeadGoesToTheDlqUnblocks) {
  GroupPolicy policy;
  policy.max_attempts = 2;
  policy.backoff_ms = {1'000};
  svc_->SetGroupPolicy("g", policy);
  SendToGroup("f", 0, "A", "poison");
  SendToGroup("f", 0, "A", "a2");
  ASSERT_THAT(Bodies(Recv("g", "f", 16, 5'000)), ElementsAre("poison"));
  Advance(5'000);  // lease ends
  Advance(1'000);  // backoff
  auto second = Recv("g", "f", 16, 5'000);
  ASSERT_THAT(Bodies(second), ElementsAre("poison"));
  EXPECT_EQ(second[0].delivery_attempt, 2);
  Advance(5'000);  // attempt 2 of 2 expires: DLQ
  EXPECT_EQ(svc_->DlqDepth("g"), 1);
  auto next = Recv("g", "f", 16);
  ASSERT_THAT(Bodies(next), ElementsAre("a2"));
  auto dead = Recv("ops", "%DLQ%g");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].message.body, "poison");
  EXPECT_EQ(dead[0].message.properties.at(prop::kMessageGroup), "A");
}

TEST_P(ConsumerTest, FifoDelayedMessageJoinsItsGroupWhenDelivered) {
  SendToGroup("f", 0, "A", "a1");
  Message delayed;
  delayed.topic = "f";
  delayed.queue_id = 0;
  delayed.body = "a-delayed";
  delayed.properties[prop::kMessageGroup] = "A";
  ASSERT_TRUE(timers()->Schedule(std::move(delayed), clock_.NowMs() + 10'000).ok());
  Advance(10'000);  // delivered into f behind a1
  SendToGroup("f", 0, "A", "a2");
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    auto got = Recv("g", "f", 16);
    ASSERT_EQ(got.size(), 1u) << "round " << i;
    order.push_back(got[0].message.body);
    ASSERT_TRUE(svc_->Ack("g", got[0].receipt_handle).ok());
  }
  EXPECT_THAT(order, ElementsAre("a1", "a-delayed", "a2"));
}

TEST_P(ConsumerTest, FifoRestartKeepsLeasesParkedMessagesAndOrder) {
  GroupPolicy policy;
  policy.backoff_ms = {1'000};
  svc_->SetGroupPolicy("g", policy);
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  SendToGroup("f", 0, "B", "b1");
  SendToGroup("f", 0, "B", "b2");
  SendToGroup("f", 0, "A", "a3");
  auto got = Recv("g", "f", 16, 5'000);
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "b1"));
  ASSERT_TRUE(svc_->Nack("g", got[1].receipt_handle, 3'000).ok());  // b1 parked until +3 s
  Restart();
  EXPECT_EQ(svc_->InFlight("g"), 1);  // a1; b1 waits for its redelivery
  EXPECT_THAT(Bodies(Recv("g", "f", 16)), IsEmpty());
  ASSERT_TRUE(svc_->Ack("g", got[0].receipt_handle).ok());  // handle from before the restart
  EXPECT_THAT(Bodies(Recv("g", "f", 16)), ElementsAre("a2"));
  Advance(3'000);
  auto b = Recv("g", "f", 16);
  ASSERT_THAT(Bodies(b), ElementsAre("b1"));
  EXPECT_EQ(b[0].delivery_attempt, 2);
  ASSERT_TRUE(svc_->Ack("g", b[0].receipt_handle).ok());
  EXPECT_THAT(Bodies(Recv("g", "f", 16)), ElementsAre("b2"));
}

TEST_P(ConsumerTest, FifoParkingIsBoundedPerQueue) {
  constexpr int kBacklog = 4096 + 8;  // kMaxFifoParked + 8
  for (int i = 0; i < kBacklog; ++i) SendToGroup("f", 0, "A", "a" + std::to_string(i));
  SendToGroup("f", 0, "B", "b0");
  auto got = Recv("g", "f", 16);
  // a0 goes out; 4096 of A's backlog are parked and the scan stops before b0.
  ASSERT_THAT(Bodies(got), ElementsAre("a0"));
  EXPECT_THAT(Bodies(Recv("g", "f", 16)), IsEmpty());
  ASSERT_TRUE(svc_->Ack("g", got[0].receipt_handle).ok());
  auto next = Recv("g", "f", 16);
  ASSERT_THAT(Bodies(next), ElementsAre("a1"));
  EXPECT_EQ(svc_->InFlight("g"), 1);
}

TEST_P(ConsumerTest, FifoHandlingFollowsATopicRecreatedWithAnotherType) {
  Send("b", 0, "plain");
  auto old = Recv("g", "b");
  ASSERT_THAT(Bodies(old), ElementsAre("plain"));  // leased, never acked
  fifo_topics_.insert("b");  // deleted and re-created as FIFO under the same name
  SendToGroup("b", 0, "A", "a1");
  SendToGroup("b", 0, "A", "a2");
  EXPECT_THAT(Bodies(Recv("g", "b", 16)), ElementsAre("a1"));
  EXPECT_THAT(Bodies(Recv("g", "b", 16)), IsEmpty());
}

TEST_P(ConsumerTest, FifoMessagesWithoutAGroupAreNotOrdered) {
  Send("f", 0, "x1");
  Send("f", 0, "x2");
  SendToGroup("f", 0, "A", "a1");
  EXPECT_THAT(Bodies(Recv("g", "f", 16)), ElementsAre("x1", "x2", "a1"));
}

// Random acks, expiries and nacks across 12 groups in two queues: every group is acked in send
// order with no gaps, and no two messages of a group are ever leased at once, across restarts.
TEST_P(ConsumerTest, FifoRandomExpiriesKeepEveryGroupInOrder) {
  GroupPolicy policy;
  policy.backoff_ms = {500};
  policy.max_attempts = 1000;
  svc_->SetGroupPolicy("g", policy);
  constexpr int kGroups = 12, kPerGroup = 40;
  std::mt19937 rng(7);
  std::vector<int> sent(kGroups, 0);
  for (int n = 0; n < kGroups * kPerGroup; ++n) {
    int grp = static_cast<int>(rng() % kGroups);
    while (sent[grp] == kPerGroup) grp = (grp + 1) % kGroups;
    SendToGroup("f2", grp % 2, "G" + std::to_string(grp),
                "G" + std::to_string(grp) + ":" + std::to_string(sent[grp]++));
  }
  std::vector<int> acked(kGroups, 0);
  // Until when each group's last delivery is leased by us (0: not leased).
  std::vector<int64_t> held(kGroups, 0);
  int rounds = 0;
  int total = 0;
  int expired = 0;
  while (total < kGroups * kPerGroup) {
    ASSERT_LT(++rounds, 20'000) << "stuck after " << total << " acks";
    for (auto& m : Recv("g", "f2", 8, 2'000)) {
      const std::string& body = m.message.body;
      const int gi = std::stoi(body.substr(1, body.find(':') - 1));
      const int seq = std::stoi(body.substr(body.find(':') + 1));
      ASSERT_LE(held[gi], clock_.NowMs()) << "group " << gi << " handed out while leased";
      ASSERT_EQ(seq, acked[gi]) << "group " << gi << " out of order";
      // Settle: ack (70 %), nack (10 %), or let the lease expire (20 %).
      const unsigned roll = rng() % 10;
      if (roll < 7) {
        ASSERT_TRUE(svc_->Ack("g", m.receipt_handle).ok());
        ++acked[gi];
        ++total;
        held[gi] = 0;
      } else if (roll < 8) {
        ASSERT_TRUE(svc_->Nack("g", m.receipt_handle, std::nullopt).ok());
        held[gi] = 0;
      } else {
        held[gi] = m.invisible_until_ms;
        ++expired;
      }
    }
    Advance(300);
    // Now and then the broker restarts: leases, parked entries and the group index are rebuilt
    // from the group state; handles stay valid.
    if (rounds % 40 == 0) Restart();
  }
  EXPECT_GT(expired, 20);
  for (int gi = 0; gi < kGroups; ++gi) EXPECT_EQ(acked[gi], kPerGroup) << "group " << gi;
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_EQ(svc_->DlqDepth("g"), 0);
}

}  // namespace
}  // namespace tokimq::testing
