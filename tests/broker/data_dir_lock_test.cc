// A second Broker on a data dir that an open Broker holds is refused with a clear error and
// leaves the first one's data alone.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "broker/broker.h"
#include "test_util.h"

namespace tokimq::broker {
namespace {

BrokerOptions OptionsFor(const std::string& dir) {
  BrokerOptions o;
  o.data_dir = dir;
  o.manual_clock = true;
  o.manual_clock_start_ms = 1'700'000'000'000;
  o.timer_thread_nice = 0;
  o.retention_interval_ms = 0;
  return o;
}

TEST(DataDirLockTest, SecondBrokerOnTheSameDirIsRefusedWithTheDirInTheText) {
  testing::TempDir dir;
  auto first = Broker::Open(OptionsFor(dir.path()));
  ASSERT_TRUE(first.ok()) << first.status();

  auto second = Broker::Open(OptionsFor(dir.path()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_NE(second.status().message().find("data directory " + dir.path() + " is in use"),
            std::string::npos)
      << second.status();
  EXPECT_NE(second.status().message().find("--data-dir"), std::string::npos);

  // Once the first broker is closed the dir opens again.
  first->reset();
  auto third = Broker::Open(OptionsFor(dir.path()));
  EXPECT_TRUE(third.ok()) << third.status();
}

}  // namespace
}  // namespace tokimq::broker
