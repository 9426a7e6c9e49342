// campaign_order.h: the order in which a broker group's replicas campaign in the etcd election
// (docs/replication.md "A stale replica does not lead").
#include "campaign_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tokimq::broker {
namespace {

CampaignRank Rank(int64_t end, bool stale, int32_t id) { return {end, stale, id}; }

TEST(CampaignOrderTest, LongerCommitLogGoesFirstWhateverItsGroupState) {
  // A stale replica with the longest log still leads: a shorter log would drop its bytes.
  EXPECT_TRUE(CampaignsBefore(Rank(200, true, 2), Rank(100, false, 0)));
  EXPECT_FALSE(CampaignsBefore(Rank(100, false, 0), Rank(200, true, 2)));
}

TEST(CampaignOrderTest, AtEqualEndsAFreshGroupStateGoesBeforeAStaleOne) {
  EXPECT_TRUE(CampaignsBefore(Rank(100, false, 2), Rank(100, true, 0)));
  EXPECT_FALSE(CampaignsBefore(Rank(100, true, 0), Rank(100, false, 2)));
}

TEST(CampaignOrderTest, AtEqualEndsAndStatesTheLowerBrokerIdGoesFirst) {
  EXPECT_TRUE(CampaignsBefore(Rank(100, false, 0), Rank(100, false, 1)));
  EXPECT_FALSE(CampaignsBefore(Rank(100, false, 1), Rank(100, false, 0)));
  EXPECT_TRUE(CampaignsBefore(Rank(100, true, 0), Rank(100, true, 1)));
}

// Exactly one replica of any group has nobody before it (the one that campaigns).
TEST(CampaignOrderTest, ExactlyOneReplicaOfAGroupHasNobodyBeforeIt) {
  const std::vector<std::vector<CampaignRank>> groups = {
      {Rank(100, true, 0), Rank(100, false, 1), Rank(90, false, 2)},
      {Rank(100, true, 0), Rank(100, true, 1)},
      {Rank(100, true, 0), Rank(50, false, 1), Rank(50, false, 2)},
      {Rank(7, false, 3)},
  };
  const std::vector<int32_t> first = {1, 0, 0, 3};
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<int32_t> campaigning;
    for (const CampaignRank& me : groups[g]) {
      const bool outranked = std::any_of(groups[g].begin(), groups[g].end(), [&](const auto& p) {
        return p.broker_id != me.broker_id && CampaignsBefore(p, me);
      });
      if (!outranked) campaigning.push_back(me.broker_id);
    }
    ASSERT_EQ(campaigning.size(), 1u) << "group " << g;
    EXPECT_EQ(campaigning[0], first[g]) << "group " << g;
  }
}

}  // namespace
}  // namespace tokimq::broker
