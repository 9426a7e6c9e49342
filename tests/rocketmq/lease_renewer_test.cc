// LeaseRenewer on a ManualClock: server-side lease renewal for PushConsumers (auto_renew).
// The renew function stands in for the broker's ChangeInvisibleDuration.
#include "lease_renewer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/clock.h"

namespace tokimq::rocketmq {
namespace {

struct Renewal {
  std::string group;
  std::string handle;
  int64_t invisible_ms;
  int64_t at_ms;
};

class LeaseRenewerTest : public ::testing::Test {
 protected:
  LeaseRenewerTest() : renewer_(&clock_, Options()) {}
  static LeaseRenewerOptions Options() {
    LeaseRenewerOptions o;
    o.ahead_ms = 10'000;
    o.slice_ms = 60'000;
    o.max_ms = 300'000;
    o.max_entries = 3;
    return o;
  }
  // Renews like the broker: a fresh handle "<handle>+", unless the handle is in refuse_.
  int Run() {
    return renewer_.RunOnce([this](const std::string& group, const std::string& handle,
                                   int64_t invisible_ms) -> absl::StatusOr<std::string> {
      renewals_.push_back({group, handle, invisible_ms, clock_.NowMs()});
      if (handle == refuse_) return absl::FailedPreconditionError("stale");
      return handle + "+";
    });
  }

  ManualClock clock_{1'000'000};
  LeaseRenewer renewer_;
  std::vector<Renewal> renewals_;
  std::string refuse_;
};

TEST_F(LeaseRenewerTest, RenewsAheadOfTheLeaseEndBySlices) {
  const int64_t t0 = clock_.NowMs();
  ASSERT_TRUE(renewer_.Track("c1", "g", "h", t0 + 60'000));
  clock_.AdvanceMs(49'999);  // the lease ends in 10.001 s: not yet
  EXPECT_EQ(Run(), 0);
  clock_.AdvanceMs(1);  // 10 s ahead of the end
  EXPECT_EQ(Run(), 1);
  ASSERT_EQ(renewals_.size(), 1u);
  EXPECT_EQ(renewals_[0].group, "g");
  EXPECT_EQ(renewals_[0].handle, "h");
  EXPECT_EQ(renewals_[0].invisible_ms, 60'000);
  // The client's handle now stands for the renewed lease, which ends at t0 + 50 s + 60 s.
  EXPECT_EQ(renewer_.Resolve("h"), "h+");
  clock_.AdvanceMs(49'999);
  EXPECT_EQ(Run(), 0);
  clock_.AdvanceMs(1);
  EXPECT_EQ(Run(), 1);
  EXPECT_EQ(renewals_.back().handle, "h+");  // renews the current lease, not the first
  EXPECT_EQ(renewer_.Resolve("h"), "h++");
  EXPECT_EQ(renewer_.Resolve("untracked"), "untracked");
}

TEST_F(LeaseRenewerTest, StopsAtTheMaximumAndLetsTheLeaseRunOut) {
  const int64_t t0 = clock_.NowMs();
  ASSERT_TRUE(renewer_.Track("c1", "g", "h", t0 + 60'000));
  int renewed = 0;
  for (int i = 0; i < 40; ++i) {
    clock_.AdvanceMs(10'000);
    renewed += Run();
  }
  // Renewals at 50 s, 100 s, ..., 250 s after the receive (the lease then ends at 310 s);
  // none at or after 300 s.
  EXPECT_EQ(renewed, 5);
  for (const Renewal& r : renewals_) EXPECT_LT(r.at_ms - t0, 300'000);
  EXPECT_EQ(renewer_.size(), 0u);
  EXPECT_EQ(renewer_.Resolve("h"), "h");
}

TEST_F(LeaseRenewerTest, SettledOrStaleHandlesAreNotRenewed) {
  const int64_t end = clock_.NowMs() + 60'000;
  ASSERT_TRUE(renewer_.Track("c1", "g", "acked", end));
  ASSERT_TRUE(renewer_.Track("c1", "g", "stale", end));
  ASSERT_TRUE(renewer_.Track("c2", "g", "other_client", end));
  renewer_.Forget("acked");
  renewer_.ForgetClient("c2");
  refuse_ = "stale";  // e.g. acked by a native consumer, or its lease ended
  clock_.AdvanceMs(55'000);
  EXPECT_EQ(Run(), 0);
  ASSERT_EQ(renewals_.size(), 1u);
  EXPECT_EQ(renewals_[0].handle, "stale");
  EXPECT_EQ(renewer_.size(), 0u);  // the refused one is dropped
  clock_.AdvanceMs(10'000);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(renewals_.size(), 1u);
}

TEST_F(LeaseRenewerTest, ALeaseThatAlreadyEndedIsDroppedAndTrackingIsBounded) {
  const int64_t now = clock_.NowMs();
  ASSERT_TRUE(renewer_.Track("c", "g", "a", now + 60'000));
  ASSERT_TRUE(renewer_.Track("c", "g", "b", now + 60'000));
  ASSERT_TRUE(renewer_.Track("c", "g", "c", now + 1'000));
  EXPECT_FALSE(renewer_.Track("c", "g", "d", now + 60'000));  // max_entries = 3
  clock_.AdvanceMs(1'000);  // c's lease ended before any renewal could run
  EXPECT_EQ(Run(), 0);
  EXPECT_TRUE(renewals_.empty());
  EXPECT_EQ(renewer_.size(), 2u);
}

TEST(LeaseRenewerOptionsTest, TimingFollowsThePushLease) {
  LeaseRenewerOptions o = RenewerOptionsFor(60'000, 3LL * 3600 * 1000);
  EXPECT_EQ(o.slice_ms, 60'000);
  EXPECT_EQ(o.ahead_ms, 10'000);
  EXPECT_EQ(o.period_ms, 1'000);
  LeaseRenewerOptions short_lease = RenewerOptionsFor(6'000, 30'000);
  EXPECT_EQ(short_lease.ahead_ms, 3'000);
  EXPECT_EQ(short_lease.period_ms, 750);
  ManualClock clock;
  LeaseRenewer off(&clock, RenewerOptionsFor(60'000, 0));
  EXPECT_FALSE(off.Track("c", "g", "h", clock.NowMs() + 60'000));  // 0: no renewal
}

}  // namespace
}  // namespace tokimq::rocketmq
