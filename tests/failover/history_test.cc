// The history checker on hand-made histories: each class of anomaly is found and counted apart.
#include "failover/history.h"

#include <gtest/gtest.h>

namespace tokimq::testing {
namespace {

TEST(HistoryTest, CleanHistoryHasNoAnomaly) {
  History h;
  h.Attempt("a", 1000);
  h.SendOk("a", 1005);
  h.Received("a", "g1", 0, 7, 1010);
  h.Acked("a", true);
  History::Report r = h.Check();
  EXPECT_EQ(r.acknowledged, 1);
  EXPECT_EQ(r.received_ids, 1);
  EXPECT_EQ(r.lost + r.early + r.timer_duplicates + r.redelivered + r.phantom, 0) << r.ToString();
}

TEST(HistoryTest, AcknowledgedButNeverReceivedIsLostAndUnacknowledgedIsNot) {
  History h;
  h.Attempt("acked", 1000);
  h.SendOk("acked", 1000);
  h.Attempt("failed", 1000);  // the send failed: may or may not be stored
  EXPECT_EQ(h.Outstanding(), 1);
  History::Report r = h.Check();
  EXPECT_EQ(r.lost, 1);
  EXPECT_EQ(r.lost_ids, std::vector<std::string>{"acked"});
  h.Received("acked", "g1", 0, 1, 2000);
  EXPECT_EQ(h.Outstanding(), 0);
  EXPECT_EQ(h.Check().lost, 0);
}

TEST(HistoryTest, ReceiptBeforeTheEarliestPossibleDeliverTimeIsEarly) {
  History h;
  h.Attempt("x", 5000);
  h.SendOk("x", 5003);
  h.Received("x", "g1", 0, 1, 4999);
  h.Attempt("y", 6000);  // never acknowledged; its lower bound still holds
  h.Received("y", "g1", 0, 2, 5999);
  h.Attempt("z", 7000);
  h.SendOk("z", 7002);
  h.Received("z", "g1", 0, 3, 7000);  // within the send latency: not provably early
  History::Report r = h.Check();
  EXPECT_EQ(r.early, 2);
  EXPECT_EQ(r.indeterminate_received, 1);
}

TEST(HistoryTest, TheEarlierCopyOfARetriedSendIsADuplicateNotEarly) {
  History h;
  h.Attempt("r", 1000);  // stored at 1000 + delay, answer lost; the client retried later
  h.SendOk("r", 1800);   // the retry's copy: acknowledged deliver time 1800
  h.Received("r", "g1", 0, 5, 1200);
  h.Received("r", "g1", 0, 9, 1800);
  History::Report r = h.Check();
  EXPECT_EQ(r.early, 0);
  EXPECT_EQ(r.timer_duplicates, 1);
}

TEST(HistoryTest, AnotherCopyIsATimerDuplicateTheSameCopyAgainIsARedelivery) {
  History h;
  h.Attempt("m", 0);
  h.SendOk("m", 0);
  h.Received("m", "g1", 1, 10, 1);  // released by the old leader
  h.Received("m", "g1", 1, 10, 2);  // same copy again: the new leader has no consumer state
  h.Received("m", "g1", 1, 31, 3);  // released again by the new leader's timer store
  h.Received("ghost", "g1", 0, 0, 4);
  History::Report r = h.Check();
  EXPECT_EQ(r.timer_duplicates, 1);
  EXPECT_EQ(r.redelivered, 1);
  EXPECT_EQ(r.phantom, 1);
  EXPECT_EQ(r.receipts, 4);
  ASSERT_EQ(r.duplicate_examples.size(), 1u);
  EXPECT_EQ(r.duplicate_examples[0], "m: g1/1@10 at 1 from ? g1/1@31 at 3 from ?");
}

TEST(HistoryTest, CopiesOfOneSourceAreATimerDuplicateOfTwoSourcesASendDuplicate) {
  History h;
  h.Attempt("moved twice", 0);
  h.SendOk("moved twice", 0);
  h.Received("moved twice", "g1", 0, 3, 1, 1, "4096");
  h.Received("moved twice", "g1", 0, 9, 2, 1, "4096");  // the same source released again
  h.Attempt("sent twice", 0);
  h.SendOk("sent twice", 0);
  h.Received("sent twice", "g1", 0, 4, 1, 1, "5000");
  h.Received("sent twice", "g1", 1, 2, 2, 1, "7000");  // a retried send: another source
  History::Report r = h.Check();
  EXPECT_EQ(r.timer_duplicates, 1);
  EXPECT_EQ(r.send_duplicates, 1);
  EXPECT_EQ(r.redelivered, 0);
  ASSERT_EQ(r.duplicate_examples.size(), 2u);
  EXPECT_EQ(r.duplicate_examples[0], "moved twice: g1/0@3 at 1 from 4096 g1/0@9 at 2 from 4096");
}

TEST(HistoryTest, ARetryCopyIsARedeliveryNotATimerDuplicate) {
  History h;
  h.Attempt("m", 0);
  h.SendOk("m", 0);
  h.Attempt("late", 0);
  h.SendOk("late", 0);
  h.Received("m", "g1", 0, 746, 10);
  // Its ack lost in a failover: the lease expired and %RETRY%checker redelivered it.
  h.Received("m", "g1", 0, 0, 5000, /*delivery_attempt=*/2);
  // Only a retry copy reached the consumer (the first receive's answer was lost).
  h.Received("late", "g1", 0, 1, 6000, /*delivery_attempt=*/2);
  History::Report r = h.Check();
  EXPECT_EQ(r.timer_duplicates, 0);
  EXPECT_EQ(r.redelivered, 2);
  EXPECT_EQ(r.receipts, 3);
  EXPECT_EQ(r.received_ids, 2);
  EXPECT_EQ(r.lost, 0);
  EXPECT_EQ(h.Outstanding(), 0);
}

TEST(HistoryTest, ReceiptsFromCountsEveryReceiptOfOneGroupsCopies) {
  History h;
  h.Attempt("a", 0);
  h.Attempt("b", 0);
  h.Received("a", "g1", 0, 1, 1);
  h.Received("a", "g1", 0, 1, 2);  // a redelivery counts too
  h.Received("b", "g2", 0, 1, 3);
  EXPECT_EQ(h.ReceiptsFrom("g1"), 2);
  EXPECT_EQ(h.ReceiptsFrom("g2"), 1);
  EXPECT_EQ(h.ReceiptsFrom("g3"), 0);
}

}  // namespace
}  // namespace tokimq::testing
