// Backoff policy (broker/src/consumer/backoff_policy.h).
#include "consumer/backoff_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace tokimq::consumer {
namespace {

TEST(Backoff, DefaultScheduleDoublesToAnHourThenStaysHourly) {
  GroupPolicy p;
  std::vector<int64_t> expect = {10'000,  30'000,  60'000,    120'000,   240'000,
                                 480'000, 960'000, 1'920'000, 3'600'000, 3'600'000};
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(BackoffMs(p, static_cast<int>(i) + 1), expect[i]) << "attempt " << i + 1;
  }
  EXPECT_EQ(BackoffMs(p, 1000), 3'600'000);
  p.backoff_ms = {5, 7};
  EXPECT_EQ(BackoffMs(p, 1), 5);
  EXPECT_EQ(BackoffMs(p, 2), 7);
  EXPECT_EQ(BackoffMs(p, 50), 7);
}

TEST(Backoff, AttemptZeroOrNegativeCountsAsTheFirst) {
  GroupPolicy p;
  EXPECT_EQ(BackoffMs(p, 0), 10'000);
  EXPECT_EQ(BackoffMs(p, -3), 10'000);
  p.backoff_ms = {250, 500};
  EXPECT_EQ(BackoffMs(p, 0), 250);
}

TEST(Backoff, NegativePolicyEntriesMeanNoDelay) {
  GroupPolicy p;
  p.backoff_ms = {-5, 1'000};
  EXPECT_EQ(BackoffMs(p, 1), 0);
  EXPECT_EQ(BackoffMs(p, 2), 1'000);
}

TEST(Backoff, HugeAttemptNumbersStayHourlyWithoutOverflow) {
  GroupPolicy p;
  EXPECT_EQ(BackoffMs(p, INT32_MAX), 3'600'000);
}

}  // namespace
}  // namespace tokimq::consumer
