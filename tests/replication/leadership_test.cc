#include "replication/leadership.h"

#include <gtest/gtest.h>

namespace tokimq::replication {
namespace {

TEST(LeadershipTest, LeaderThatSeesANewerTermStepsDown) {
  Leadership l(Role::kLeader, 3, "");
  std::vector<LeadershipView> seen;
  l.Subscribe([&](const LeadershipView& v) { seen.push_back(v); });
  EXPECT_TRUE(l.IsLeaderOf(3));
  EXPECT_TRUE(l.ObserveTerm(3));
  EXPECT_TRUE(l.IsLeaderOf(3));
  EXPECT_TRUE(l.ObserveTerm(4));
  EXPECT_FALSE(l.IsLeaderOf(3));
  EXPECT_FALSE(l.IsLeaderOf(4));
  EXPECT_EQ(l.Current().role, Role::kFollower);
  EXPECT_EQ(l.Current().term, 4);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].term, 4);
}

TEST(LeadershipTest, MessagesFromAnOlderTermAreFenced) {
  Leadership l(Role::kFollower, 5, "127.0.0.1:1");
  EXPECT_FALSE(l.ObserveTerm(4));
  EXPECT_TRUE(l.ObserveTerm(5));
  EXPECT_EQ(l.Current().term, 5);
  EXPECT_EQ(l.Current().leader_address, "127.0.0.1:1");
}

TEST(LeadershipTest, PromoteNeedsANewTermAndDemoteNeverGoesBack) {
  Leadership l(Role::kFollower, 1, "127.0.0.1:1");
  EXPECT_EQ(l.Promote(1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(l.Promote(2).ok());
  EXPECT_TRUE(l.IsLeaderOf(2));
  EXPECT_TRUE(l.Current().leader_address.empty());
  EXPECT_EQ(l.Demote(2, "127.0.0.1:2").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(l.Demote(1, "127.0.0.1:2").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(l.Demote(3, "").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(l.Demote(3, "127.0.0.1:2").ok());
  EXPECT_EQ(l.Current().role, Role::kFollower);
  EXPECT_EQ(l.Current().leader_address, "127.0.0.1:2");
}

TEST(LeadershipTest, StepDownEndsOnlyTheGivenTermAndKeepsIt) {
  Leadership l(Role::kFollower, 1, "127.0.0.1:1");
  ASSERT_TRUE(l.Promote(7).ok());
  std::vector<LeadershipView> seen;
  l.Subscribe([&](const LeadershipView& v) { seen.push_back(v); });
  EXPECT_FALSE(l.StepDown(6));  // an older term: not the one it leads
  EXPECT_TRUE(l.IsLeaderOf(7));
  EXPECT_TRUE(l.StepDown(7));
  EXPECT_EQ(l.Current().role, Role::kFollower);
  EXPECT_EQ(l.Current().term, 7);
  EXPECT_TRUE(l.Current().leader_address.empty());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(l.StepDown(7));  // already a follower
  // The election names the next leader of a newer term, or elects this replica again.
  EXPECT_EQ(l.Promote(7).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(l.Demote(9, "127.0.0.1:2").ok());
}

}  // namespace
}  // namespace tokimq::replication
