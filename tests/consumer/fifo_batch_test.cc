// ConsumerService on FIFO topics with ReceiveRequest::max_per_group > 1: runs of consecutive
// messages of one message group under one lease each, the group blocked until every one is
// settled, a nack or an expiry returning the rest of the run in order (docs/ordering.md
// "Batches per message group"). Both stores (ConsumerTest is parameterised over them).
#include <gmock/gmock.h>

#include <random>

#include "consumer/consumer_env.h"

namespace tokimq::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class FifoBatchTest : public ConsumerTest {
 protected:
  std::vector<ReceivedMessage> RecvRuns(const std::string& group, const std::string& topic, int max,
                                        int per_group, int64_t invisible_ms = 30'000) {
    ReceiveRequest req;
    req.group = group;
    req.topic = topic;
    req.max_messages = max;
    req.max_per_group = per_group;
    req.invisible_ms = invisible_ms;
    auto r = svc_->Receive(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : std::vector<ReceivedMessage>{};
  }
  void AckAll(const std::vector<ReceivedMessage>& got, std::initializer_list<size_t> which) {
    for (size_t i : which) ASSERT_TRUE(svc_->Ack("g", got[i].receipt_handle).ok()) << i;
  }
};

TEST_P(FifoBatchTest, HandsOutARunPerGroupInQueueOrderAcrossInterleavedGroups) {
  for (int i = 1; i <= 4; ++i) {
    SendToGroup("f", 0, "A", "a" + std::to_string(i));
    SendToGroup("f", 0, "B", "b" + std::to_string(i));
  }
  SendToGroup("f", 0, "C", "c1");
  auto got = RecvRuns("g", "f", 16, 3);
  // Queue order, at most 3 of each group; a4 and b4 are parked behind their runs.
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "b1", "a2", "b2", "a3", "b3", "c1"));
  EXPECT_EQ(svc_->InFlight("g"), 7);
  EXPECT_EQ(svc_->Parked("g"), 2);
  for (const auto& m : got) EXPECT_EQ(m.delivery_attempt, 1);
  // Each message has a lease of its own: distinct handles.
  EXPECT_NE(got[0].receipt_handle, got[2].receipt_handle);
  // The groups stay blocked until every message of their run is settled.
  EXPECT_THAT(Bodies(RecvRuns("g", "f", 16, 3)), IsEmpty());
  AckAll(got, {0, 2});  // a1, a2: a3 still leased
  EXPECT_THAT(Bodies(RecvRuns("g", "f", 16, 3)), IsEmpty());
  AckAll(got, {4});  // a3: A is free
  EXPECT_THAT(Bodies(RecvRuns("g", "f", 16, 3)), ElementsAre("a4"));
}

TEST_P(FifoBatchTest, MaxPerGroupOneKeepsTheHeadOnlyRule) {
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  EXPECT_THAT(Bodies(RecvRuns("g", "f", 16, 1)), ElementsAre("a1"));
  ReceiveRequest bad;
  bad.group = "g";
  bad.topic = "f";
  bad.max_per_group = 0;
  EXPECT_EQ(svc_->Receive(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(FifoBatchTest, NackInTheMiddleOfARunReturnsItAndItsSuccessorsInOrder) {
  GroupPolicy policy;
  policy.backoff_ms = {1'000};
  svc_->SetGroupPolicy("g", policy);
  for (int i = 1; i <= 5; ++i) SendToGroup("f", 0, "A", "a" + std::to_string(i));
  SendToGroup("f", 0, "B", "b1");
  auto got = RecvRuns("g", "f", 16, 4);
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "a2", "a3", "a4", "b1"));
  AckAll(got, {0});                                                 // a1 done
  ASSERT_TRUE(svc_->Nack("g", got[1].receipt_handle, 2'000).ok());  // a2 failed
  EXPECT_EQ(svc_->InFlight("g"), 1);                                // b1; a3, a4 came back with a2
  EXPECT_EQ(svc_->Parked("g"), 4);  // a2 (backoff), a3, a4 behind it, a5
  // The successors' handles are stale: they went back.
  EXPECT_EQ(svc_->Ack("g", got[2].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(svc_->Ack("g", got[3].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  Advance(1'999);
  EXPECT_THAT(Bodies(RecvRuns("g", "f", 16, 4)), IsEmpty()) << "the nack's delay holds A";
  Advance(1);
  auto again = RecvRuns("g", "f", 16, 4);
  ASSERT_THAT(Bodies(again), ElementsAre("a2", "a3", "a4", "a5"));
  EXPECT_EQ(again[0].delivery_attempt, 2);  // the one that failed
  EXPECT_EQ(again[1].delivery_attempt, 1);  // returned with it: not counted
  EXPECT_EQ(again[3].delivery_attempt, 1);
  EXPECT_EQ(again[0].message.queue_offset.value(), 1);  // in place, not a retry copy
  AckAll(again, {0, 1, 2, 3});
  AckAll(got, {4});
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_EQ(svc_->Parked("g"), 0);
}

TEST_P(FifoBatchTest, AckedSuccessorStaysAckedWhenAnEarlierMessageIsNacked) {
  SendToGroup("f", 0, "A", "a1");
  SendToGroup("f", 0, "A", "a2");
  SendToGroup("f", 0, "A", "a3");
  auto got = RecvRuns("g", "f", 16, 3);
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "a2", "a3"));
  AckAll(got, {1});  // a2 done out of order (another event type of the key)
  ASSERT_TRUE(svc_->Nack("g", got[0].receipt_handle, 0).ok());
  auto again = RecvRuns("g", "f", 16, 3);
  ASSERT_THAT(Bodies(again), ElementsAre("a1", "a3"));
  EXPECT_EQ(again[0].delivery_attempt, 2);
  EXPECT_EQ(again[1].delivery_attempt, 1);
}

TEST_P(FifoBatchTest, ExpiryOfARunReturnsTheWholeRunWithTheBackoffOnTheFirst) {
  GroupPolicy policy;
  policy.backoff_ms = {1'000};
  svc_->SetGroupPolicy("g", policy);
  for (int i = 1; i <= 3; ++i) SendToGroup("f", 0, "A", "a" + std::to_string(i));
  auto got = RecvRuns("g", "f", 16, 3, 5'000);
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "a2", "a3"));
  // a3's lease is renewed; a1 and a2 expire at +5 s, which returns a3 as well.
  ASSERT_TRUE(svc_->ChangeInvisibleDuration("g", got[2].receipt_handle, 60'000).ok());
  Advance(5'000);
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_EQ(svc_->Parked("g"), 3);
  Advance(999);
  EXPECT_THAT(Bodies(RecvRuns("g", "f", 16, 3)), IsEmpty());
  Advance(1);
  auto again = RecvRuns("g", "f", 16, 3);
  ASSERT_THAT(Bodies(again), ElementsAre("a1", "a2", "a3"));
  EXPECT_EQ(again[0].delivery_attempt, 2);
  EXPECT_EQ(again[1].delivery_attempt, 1);
  EXPECT_EQ(again[2].delivery_attempt, 1);
}

TEST_P(FifoBatchTest, HeadToTheDlqReturnsTheRunBehindIt) {
  GroupPolicy policy;
  policy.max_attempts = 1;
  svc_->SetGroupPolicy("g", policy);
  for (int i = 1; i <= 3; ++i) SendToGroup("f", 0, "A", "a" + std::to_string(i));
  auto got = RecvRuns("g", "f", 16, 3);
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "a2", "a3"));
  ASSERT_TRUE(svc_->Nack("g", got[0].receipt_handle, 0).ok());  // attempt 1 of 1: DLQ
  EXPECT_EQ(svc_->DlqDepth("g"), 1);
  auto again = RecvRuns("g", "f", 16, 3);
  ASSERT_THAT(Bodies(again), ElementsAre("a2", "a3"));
  EXPECT_EQ(again[0].delivery_attempt, 1);
}

TEST_P(FifoBatchTest, RestartWithARunLeasedKeepsItsLeasesAndOrder) {
  GroupPolicy policy;
  policy.backoff_ms = {1'000};
  svc_->SetGroupPolicy("g", policy);
  for (int i = 1; i <= 4; ++i) SendToGroup("f", 0, "A", "a" + std::to_string(i));
  SendToGroup("f", 0, "B", "b1");
  auto got = RecvRuns("g", "f", 16, 3);
  ASSERT_THAT(Bodies(got), ElementsAre("a1", "a2", "a3", "b1"));
  Restart();
  EXPECT_EQ(svc_->InFlight("g"), 4);
  EXPECT_EQ(svc_->Parked("g"), 1);  // a4
  EXPECT_THAT(Bodies(RecvRuns("g", "f", 16, 3)), IsEmpty());
  AckAll(got, {0});  // handles from before the restart
  ASSERT_TRUE(svc_->Nack("g", got[1].receipt_handle, 0).ok());
  Restart();
  EXPECT_EQ(svc_->InFlight("g"), 1);  // b1
  auto again = RecvRuns("g", "f", 16, 3);
  ASSERT_THAT(Bodies(again), ElementsAre("a2", "a3", "a4"));
  EXPECT_EQ(again[0].delivery_attempt, 2);
  EXPECT_EQ(again[2].delivery_attempt, 1);
}

TEST_P(FifoBatchTest, ParkingBoundHoldsWithRuns) {
  constexpr int kBacklog = 4096 + 8;  // kMaxFifoParked + 8
  for (int i = 0; i < kBacklog; ++i) SendToGroup("f", 0, "A", "a" + std::to_string(i));
  SendToGroup("f", 0, "B", "b0");
  auto got = RecvRuns("g", "f", 16, 4);
  // a0..a3 go out; 4096 of A's backlog are parked and the scan stops before b0.
  ASSERT_THAT(Bodies(got), ElementsAre("a0", "a1", "a2", "a3"));
  EXPECT_EQ(svc_->Parked("g"), 4096);
  EXPECT_THAT(Bodies(RecvRuns("g", "f", 16, 4)), IsEmpty());
  AckAll(got, {0, 1, 2, 3});
  auto next = RecvRuns("g", "f", 16, 4);
  ASSERT_THAT(Bodies(next), ElementsAre("a4", "a5", "a6", "a7"));
}

// Random runs: acks, nacks and expiries of random members of each run, across restarts; every
// group is acked in send order with no gap and no duplicate ack.
TEST_P(FifoBatchTest, RandomRunsKeepEveryGroupInOrder) {
  GroupPolicy policy;
  policy.backoff_ms = {500};
  policy.max_attempts = 1000;
  svc_->SetGroupPolicy("g", policy);
  constexpr int kGroups = 8, kPerGroup = 40;
  std::mt19937 rng(11);
  std::vector<int> sent(kGroups, 0);
  for (int n = 0; n < kGroups * kPerGroup; ++n) {
    int grp = static_cast<int>(rng() % kGroups);
    while (sent[grp] == kPerGroup) grp = (grp + 1) % kGroups;
    SendToGroup("f2", grp % 2, "G" + std::to_string(grp),
                "G" + std::to_string(grp) + ":" + std::to_string(sent[grp]++));
  }
  std::vector<int> acked(kGroups, 0);
  int total = 0;
  for (int rounds = 1; total < kGroups * kPerGroup; ++rounds) {
    ASSERT_LT(rounds, 20'000) << "stuck after " << total << " acks";
    auto got = RecvRuns("g", "f2", 16, 1 + static_cast<int>(rng() % 5), 2'000);
    std::map<int, std::vector<const ReceivedMessage*>> runs;
    for (const auto& m : got) {
      const std::string& body = m.message.body;
      runs[std::stoi(body.substr(1, body.find(':') - 1))].push_back(&m);
    }
    for (auto& [gi, run] : runs) {
      for (size_t i = 0; i < run.size(); ++i) {
        const std::string& body = run[i]->message.body;
        ASSERT_EQ(std::stoi(body.substr(body.find(':') + 1)), acked[gi] + static_cast<int>(i))
            << "group " << gi << " run out of order";
      }
      // Ack a prefix, then nack the next (40 %), let the rest expire (20 %), or ack all.
      const size_t done = rng() % (run.size() + 1);
      for (size_t i = 0; i < done; ++i) {
        ASSERT_TRUE(svc_->Ack("g", run[i]->receipt_handle).ok());
      }
      acked[gi] += static_cast<int>(done);
      total += static_cast<int>(done);
      if (done == run.size()) continue;
      const unsigned roll = rng() % 10;
      if (roll < 4) {
        ASSERT_TRUE(svc_->Nack("g", run[done]->receipt_handle, std::nullopt).ok());
      } else if (roll < 6) {
        continue;  // expires
      } else {
        for (size_t i = done; i < run.size(); ++i) {
          ASSERT_TRUE(svc_->Ack("g", run[i]->receipt_handle).ok());
        }
        acked[gi] += static_cast<int>(run.size() - done);
        total += static_cast<int>(run.size() - done);
      }
    }
    Advance(300);
    if (rounds % 40 == 0) Restart();
  }
  for (int gi = 0; gi < kGroups; ++gi) EXPECT_EQ(acked[gi], kPerGroup) << "group " << gi;
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_EQ(svc_->Parked("g"), 0);
  EXPECT_EQ(svc_->DlqDepth("g"), 0);
}

INSTANTIATE_TEST_SUITE_P(Stores, FifoBatchTest, ::testing::Values("fake", "real"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tokimq::testing
