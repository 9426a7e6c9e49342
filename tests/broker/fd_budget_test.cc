// The broker's descriptor budget (broker/fd_budget.h) and its configuration key.
#include "broker/fd_budget.h"

#include <gtest/gtest.h>

#include "broker/config.h"

namespace tokimq::broker {
namespace {

TEST(FdBudgetTest, CacheGetsHalfOfWhatTheReserveLeaves) {
  EXPECT_EQ(MaxOpenFilesFor(1024), 480u);    // Debian's systemd default
  EXPECT_EQ(MaxOpenFilesFor(65536), 32736u);
  EXPECT_EQ(MaxOpenFilesFor(256), 96u);
  EXPECT_EQ(MaxOpenFilesFor(64), kMinAutoOpenFiles);  // nothing left: the floor
  EXPECT_EQ(MaxOpenFilesFor(0), kMinAutoOpenFiles);
  EXPECT_EQ(MaxOpenFilesFor(uint64_t{1} << 40), kMaxAutoOpenFiles);
}

TEST(FdBudgetTest, DescriptionSaysWhatTheCacheHoldsAndWarnsWhenNothingIsLeft) {
  NoFileLimit l;
  l.soft = 1024;
  l.hard = 4096;
  l.raised_from = 256;
  const std::string d = DescribeBudget(l, 480);
  EXPECT_NE(d.find("limit 1024 (raised from 256), hard 4096"), std::string::npos) << d;
  EXPECT_NE(d.find("holds 480 files (60 topics"), std::string::npos) << d;
  EXPECT_NE(d.find("480 left"), std::string::npos) << d;
  EXPECT_EQ(d.find("WARNING"), std::string::npos) << d;
  EXPECT_NE(DescribeBudget(l, 2000).find("WARNING"), std::string::npos);
}

TEST(FdBudgetTest, ConfiguredCacheAboveTheLimitIsLowered) {
  EXPECT_EQ(ClampMaxOpenFiles(4000, 1024), 720u);  // 3/4 of 1024 - 64
  EXPECT_EQ(ClampMaxOpenFiles(500, 1024), 500u);   // fits: kept
  EXPECT_EQ(ClampMaxOpenFiles(4000, 20), kMinAutoOpenFiles);
}

TEST(FdBudgetTest, RaiseNeverLowersTheLimit) {
  const NoFileLimit before = CurrentNoFileLimit();
  const NoFileLimit after = RaiseNoFileLimit();
  EXPECT_GE(after.soft, before.soft);
  EXPECT_EQ(after.hard, before.hard);
  EXPECT_EQ(CurrentNoFileLimit().soft, after.soft);
}

TEST(FdBudgetTest, MaxOpenFilesIsAConfigKey) {
  BrokerConfig c;
  ASSERT_TRUE(LoadConfigText("max_open_files = 2000\n", &c).ok());
  EXPECT_EQ(c.broker.max_open_files, 2000u);
  EXPECT_EQ(BrokerConfig().broker.max_open_files, 0u);  // default: from the limit
  EXPECT_FALSE(LoadConfigText("max_open_files = -1\n", &c).ok());
}

}  // namespace
}  // namespace tokimq::broker
