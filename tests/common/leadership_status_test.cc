// The leadership errors a broker group member answers and the client retry test on them
// (common/leadership_status.h).
#include "common/leadership_status.h"

#include <gtest/gtest.h>

namespace tokimq {
namespace {

TEST(LeadershipStatusTest, TheBrokersLeadershipErrorsAreRetried) {
  const absl::Status follower = FollowerError(13, "127.0.0.1:9001");
  EXPECT_TRUE(absl::IsFailedPrecondition(follower));
  EXPECT_EQ(follower.message(),
            "this broker is a follower in term 13 (leader: 127.0.0.1:9001); send to the leader");
  EXPECT_TRUE(IsLeaderMoved(follower));

  const absl::Status unknown = FollowerError(4, "");
  EXPECT_EQ(unknown.message(),
            "this broker is a follower in term 4 (leader: unknown); send to the leader");
  EXPECT_TRUE(IsLeaderMoved(unknown));

  const absl::Status lease = LeaseMayHaveExpiredError(7);
  EXPECT_TRUE(absl::IsFailedPrecondition(lease));
  EXPECT_TRUE(IsLeaderMoved(lease));

  // Finding B of the stop-33 tester: one send per election failed with this one.
  const absl::Status starting = BecomingLeaderError(9);
  EXPECT_TRUE(absl::IsFailedPrecondition(starting));
  EXPECT_EQ(starting.message(),
            "this broker is becoming the leader of term 9: its services are starting; retry");
  EXPECT_TRUE(IsLeaderMoved(starting));
}

TEST(LeadershipStatusTest, UnreachableLeadersAreRetried) {
  EXPECT_TRUE(IsLeaderMoved(absl::UnavailableError("connect: refused")));
  EXPECT_TRUE(IsLeaderMoved(absl::DeadlineExceededError("request timed out")));
}

TEST(LeadershipStatusTest, OtherFailuresAreNotRetried) {
  EXPECT_FALSE(IsLeaderMoved(absl::OkStatus()));
  EXPECT_FALSE(IsLeaderMoved(absl::FailedPreconditionError("handle already used")));
  EXPECT_FALSE(IsLeaderMoved(absl::FailedPreconditionError(
      "this broker is a single node, not in a cluster (start it with --cluster)")));
  EXPECT_FALSE(IsLeaderMoved(absl::InvalidArgumentError("delay exceeds the max delay")));
  EXPECT_FALSE(IsLeaderMoved(absl::NotFoundError("topic 't1' does not exist")));
  EXPECT_FALSE(IsLeaderMoved(absl::ResourceExhaustedError("disk full")));
}

}  // namespace
}  // namespace tokimq
