// The console's pure parts: the timer view from a known Stats answer and due counts, and the
// rate tracker on a manual time line.
#include <gtest/gtest.h>

#include "console/rate_tracker.h"
#include "console/stats_json.h"

namespace tokimq::broker::console {
namespace {

TEST(TimerJsonTest, CarriesTheDueCountsAndTheLatenessHistogramAsGiven) {
  proto::StatsResponse st;
  proto::TimerStats* tm = st.mutable_timer();
  tm->set_pending(17);
  tm->set_delivered(40);
  tm->set_lateness_p50_ms(3);
  tm->set_lateness_p99_ms(12);
  tm->set_lateness_max_ms(15);
  tm->set_lateness_count(40);
  for (auto [upper, count] : {std::pair{3, 30}, {12, 9}, {15, 1}}) {
    auto* b = tm->add_lateness_buckets();
    b->set_upper_ms(upper);
    b->set_count(count);
  }
  for (int i = 0; i < 9; ++i) tm->add_pending_by_bucket(i == 1 ? 10 : i == 4 ? 7 : 0);
  DueCounts minutes{1'000, 60'000, std::vector<int64_t>(60, 0), 7};
  minutes.counts[0] = 4;
  minutes.counts[1] = 6;
  DueCounts hours{1'000, 3'600'000, std::vector<int64_t>(168, 0), 0};
  hours.counts[0] = 17;

  nlohmann::json j = TimerJson(st, minutes, hours);
  EXPECT_EQ(j["now_ms"], 1'000);
  EXPECT_EQ(j["pending"], 17);
  EXPECT_EQ(j["per_minute"]["counts"][0], 4);
  EXPECT_EQ(j["per_minute"]["counts"][1], 6);
  EXPECT_EQ(j["per_minute"]["later"], 7);
  EXPECT_EQ(j["per_hour"]["counts"].size(), 168u);
  EXPECT_EQ(j["per_hour"]["counts"][0], 17);
  EXPECT_EQ(j["pending_by_remaining"][1]["label"], "<=1m");
  EXPECT_EQ(j["pending_by_remaining"][1]["count"], 10);
  EXPECT_EQ(j["pending_by_remaining"][4]["count"], 7);
  EXPECT_EQ(j["lateness"]["p99_ms"], 12);
  EXPECT_EQ(j["lateness"]["count"], 40);
  ASSERT_EQ(j["lateness"]["buckets"].size(), 3u);
  EXPECT_EQ(j["lateness"]["buckets"][1]["upper_ms"], 12);
  EXPECT_EQ(j["lateness"]["buckets"][1]["count"], 9);
}

TEST(DiskStateNameTest, NamesAsTheCliPrintsThem) {
  EXPECT_STREQ(DiskStateName(proto::DISK_OK), "ok");
  EXPECT_STREQ(DiskStateName(proto::DISK_ABOVE_WATERMARK), "above_watermark");
  EXPECT_STREQ(DiskStateName(proto::DISK_FULL), "full");
}

TEST(RateTrackerTest, RatesOverTheWindowFromTheOldestKeptSample) {
  RateTracker r(10'000);
  EXPECT_EQ(r.Update(0, {{"a", 100}})["a"], 0.0);
  EXPECT_EQ(r.Update(2'000, {{"a", 120}})["a"], 10.0);
  EXPECT_EQ(r.Update(2'500, {{"a", 125}})["a"], 10.0);  // not kept: within a second
  EXPECT_EQ(r.Update(10'000, {{"a", 200}})["a"], 10.0);
  // 12 s: the sample of 2 s is the newest one at least 10 s old; the one of 0 s goes.
  EXPECT_EQ(r.Update(12'000, {{"a", 200}})["a"], 8.0);  // (200 - 120) / 10 s
  // A name new since the base counts from 0; a count that went down rates 0.
  std::map<std::string, double> m = r.Update(14'000, {{"a", 50}, {"b", 30}});
  EXPECT_EQ(m["a"], 0.0);
  EXPECT_EQ(m["b"], 2.5);  // 30 over the 12 s since the base sample
}

}  // namespace
}  // namespace tokimq::broker::console
