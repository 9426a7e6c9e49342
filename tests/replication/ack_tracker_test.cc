#include "replication/ack_tracker.h"

#include <gtest/gtest.h>

#include <optional>

namespace tokimq::replication {
namespace {

class AckTrackerTest : public ::testing::Test {
 protected:
  // Registers a wait whose answer lands in *out.
  void Wait(int64_t end, std::optional<absl::Status>* out, int64_t timeout_ms = 1000) {
    tracker_.WhenReplicated(PhysicalOffset(end), timeout_ms, [out](absl::Status s) { *out = s; });
  }
  ManualClock clock_;
  AckTracker tracker_{&clock_};
};

TEST_F(AckTrackerTest, OneFollowerAckAnswersEveryWaitBelowIt) {
  std::optional<absl::Status> a, b, c;
  Wait(100, &a);
  Wait(200, &b);
  Wait(300, &c);
  EXPECT_EQ(tracker_.pending(), 3u);
  tracker_.OnFollowerAck(PhysicalOffset(250));
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_TRUE(a->ok());
  EXPECT_TRUE(b->ok());
  EXPECT_FALSE(c.has_value());
  tracker_.OnFollowerAck(PhysicalOffset(200));  // older report: ignored
  EXPECT_EQ(tracker_.acked_offset(), PhysicalOffset(250));
  tracker_.OnFollowerAck(PhysicalOffset(300));
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->ok());
}

TEST_F(AckTrackerTest, WaitAlreadyCoveredIsAnsweredInline) {
  tracker_.OnFollowerAck(PhysicalOffset(500));
  std::optional<absl::Status> a;
  Wait(500, &a);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->ok());
}

TEST_F(AckTrackerTest, NoFollowerMeansNoAckAfterTheTimeout) {
  std::optional<absl::Status> a, b;
  Wait(100, &a, 1000);
  Wait(100, &b, 3000);
  clock_.AdvanceMs(999);
  EXPECT_EQ(tracker_.ExpireWaits(), 0);
  clock_.AdvanceMs(1);
  EXPECT_EQ(tracker_.ExpireWaits(), 1);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(b.has_value());
}

TEST_F(AckTrackerTest, DeposedLeaderFailsPendingAndLaterWaitsUntilReset) {
  std::optional<absl::Status> a, b, c;
  Wait(100, &a);
  tracker_.Fail(absl::UnavailableError("deposed"));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->code(), absl::StatusCode::kUnavailable);
  tracker_.OnFollowerAck(PhysicalOffset(1000));  // a late ack from the old term answers nothing
  Wait(50, &b);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->code(), absl::StatusCode::kUnavailable);
  tracker_.Reset(PhysicalOffset(0));
  Wait(50, &c);
  EXPECT_FALSE(c.has_value());
  tracker_.OnFollowerAck(PhysicalOffset(60));
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->ok());
}

}  // namespace
}  // namespace tokimq::replication
