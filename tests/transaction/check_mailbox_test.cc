// CheckMailbox: the native check-back channel's liveness and queueing (no waiting: every poll
// here has a long poll of 0).
#include "transaction/check_mailbox.h"

#include <gtest/gtest.h>

namespace tokimq::broker {
namespace {

proto::TransactionCheck Check(const std::string& topic, const std::string& id) {
  proto::TransactionCheck c;
  c.set_topic(topic);
  c.set_message_id(id);
  return c;
}

TEST(CheckMailboxTest, NoLiveProducerRefusesTheCheck) {
  CheckMailbox box;
  EXPECT_FALSE(box.Offer(Check("t", "1")));
}

TEST(CheckMailboxTest, APollMakesTheTopicLiveAndReceivesItsChecksInOrder) {
  CheckMailbox box(/*live_ms=*/60'000);
  EXPECT_TRUE(box.Poll({"t"}, 0, 0).empty());
  EXPECT_TRUE(box.Offer(Check("t", "1")));
  EXPECT_TRUE(box.Offer(Check("t", "2")));
  EXPECT_FALSE(box.Offer(Check("other", "3")));
  std::vector<proto::TransactionCheck> got = box.Poll({"t"}, 0, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message_id(), "1");
  got = box.Poll({"other", "t"}, 0, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message_id(), "2");
}

TEST(CheckMailboxTest, LivenessEndsAfterLiveMs) {
  CheckMailbox box(/*live_ms=*/0);
  EXPECT_TRUE(box.Poll({"t"}, 0, 0).empty());
  EXPECT_FALSE(box.Offer(Check("t", "1")));  // the poll ended and live_ms = 0
}

TEST(CheckMailboxTest, AtMostTheQueueLimitWaitsPerTopic) {
  CheckMailbox box(60'000);
  (void)box.Poll({"t"}, 0, 0);
  for (size_t i = 0; i < CheckMailbox::kMaxQueuedPerTopic + 5; ++i) {
    ASSERT_TRUE(box.Offer(Check("t", std::to_string(i))));
  }
  std::vector<proto::TransactionCheck> got =
      box.Poll({"t"}, 0, static_cast<int>(CheckMailbox::kMaxQueuedPerTopic) + 100);
  ASSERT_EQ(got.size(), CheckMailbox::kMaxQueuedPerTopic);
  EXPECT_EQ(got.front().message_id(), "5");  // the oldest were dropped
}

}  // namespace
}  // namespace tokimq::broker
