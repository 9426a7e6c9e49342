// Broker::Handle for the AdvanceClock admin request, on an in-process broker with a manual
// clock in a temp dir (no server, no sleeps).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "broker/broker.h"
#include "proto/tokimq.pb.h"
#include "test_util.h"

namespace tokimq::broker {
namespace {

class AdvanceClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BrokerOptions o;
    o.data_dir = dir_.path();
    o.manual_clock = true;
    o.manual_clock_start_ms = kStartMs;
    o.timer_window_ms = 3'600'000;
    o.timer_thread_nice = 0;
    o.retention_interval_ms = 0;
    auto b = Broker::Open(o);
    ASSERT_TRUE(b.ok()) << b.status();
    broker_ = std::move(*b);
  }

  proto::Response Advance(int64_t ms) {
    proto::Request req;
    req.set_id(7);
    req.mutable_advance_clock()->set_advance_ms(ms);
    proto::Response resp;
    broker_->Handle(req, &resp);
    return resp;
  }

  static constexpr int64_t kStartMs = 1'700'000'000'000;
  testing::TempDir dir_;
  std::unique_ptr<Broker> broker_;
};

TEST_F(AdvanceClockTest, AdvancesAndAnswersTheNewTime) {
  proto::Response resp = Advance(5000);
  EXPECT_EQ(resp.status().code(), 0);
  EXPECT_EQ(resp.advance_clock().now_ms(), kStartMs + 5000);
}

// fuzz/broker_request: advance_ms = INT64_MAX overflowed the clock's microseconds (undefined
// behaviour; in practice the clock jumped backwards).
TEST_F(AdvanceClockTest, AdvancePastYear9999IsRefusedAndTheClockStays) {
  for (int64_t ms : {INT64_MAX, INT64_MAX / 1000 + 1, kMaxManualClockMs - kStartMs + 1}) {
    proto::Response resp = Advance(ms);
    EXPECT_EQ(resp.id(), 7u);
    EXPECT_EQ(resp.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument)) << ms;
    EXPECT_EQ(broker_->clock()->NowMs(), kStartMs) << ms;
  }
  // (Not advanced to the limit itself: the timer would then walk ~2.5e11 empty ticks.)
  proto::Response ok = Advance(1000);
  EXPECT_EQ(ok.status().code(), 0);
  EXPECT_EQ(ok.advance_clock().now_ms(), kStartMs + 1000);
}

}  // namespace
}  // namespace tokimq::broker
