// TOML configuration of the broker (broker/config.h).
#include "broker/config.h"

#include <gtest/gtest.h>

namespace tokimq::broker {
namespace {

TEST(ConfigTest, AppliesKeysAndGroupPolicies) {
  BrokerConfig c;
  absl::Status s = LoadConfigText(R"(
data_dir = "/var/lib/tokimq"
bind = "0.0.0.0"
port = 9000
flush = "sync"
timer_precision = "100ms"
timer_thread_nice = -3
retention = "7d"
retention_interval = "5m"
segment_size = 4096
max_frame_bytes = 1048576
max_message_size = 524288
manual_clock = true
[group.billing]
max_attempts = 3
backoff = ["1s", "5s", 10000]
ttl = "1h"
)",
                                  &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.broker.data_dir, "/var/lib/tokimq");
  EXPECT_EQ(c.server.bind_address, "0.0.0.0");
  EXPECT_EQ(c.server.port, 9000);
  EXPECT_EQ(c.broker.flush_mode, FlushMode::kSync);
  EXPECT_EQ(c.broker.timer_precision_ms, 100);
  EXPECT_EQ(c.broker.timer_thread_nice, -3);
  EXPECT_EQ(BrokerConfig().broker.timer_thread_nice, -10);  // the default
  EXPECT_EQ(c.broker.default_retention_ms, 7LL * 24 * 3600 * 1000);
  EXPECT_EQ(c.broker.retention_interval_ms, 5 * 60 * 1000);
  EXPECT_EQ(c.broker.commitlog_segment_size, 4096u);
  EXPECT_EQ(c.server.max_frame_bytes, 1u << 20);
  EXPECT_EQ(c.broker.max_message_size, 512u << 10);
  EXPECT_TRUE(c.broker.manual_clock);
  const GroupPolicy& p = c.broker.group_policies.at("billing");
  EXPECT_EQ(p.max_attempts, 3);
  EXPECT_EQ(p.backoff_ms, (std::vector<int64_t>{1000, 5000, 10000}));
  EXPECT_EQ(p.ttl_ms, 3'600'000);
}

// A message of the max size must fit one receive answer (issue 14, defect 4): a config where
// it could not is refused at start, naming both keys.
TEST(ConfigTest, MaxMessageSizeMustLeaveRoomBelowTheFrameLimit) {
  BrokerConfig c;
  absl::Status s = LoadConfigText("max_frame_bytes = 1048576\n", &c);  // 4 MiB default body
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_message_size = 4194304 needs max_frame_bytes >= 4263936"),
            absl::string_view::npos) << s;
  s = LoadConfigText("max_message_size = 67108864\n", &c);  // 64 MiB with the 16 MiB frame
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  BrokerConfig ok;
  EXPECT_TRUE(LoadConfigText("max_message_size = 67108864\nmax_frame_bytes = 67178496\n", &ok)
                  .ok());
  BrokerConfig defaults;
  EXPECT_TRUE(LoadConfigText("", &defaults).ok());
}

TEST(ConfigTest, UnknownKeysAndBadValuesNameTheKey) {
  BrokerConfig c;
  absl::Status s = LoadConfigText("prot = 1\n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prot"), absl::string_view::npos);
  s = LoadConfigText("port = 70000\n", &c);
  EXPECT_NE(s.message().find("port"), absl::string_view::npos);
  s = LoadConfigText("retention = \"3 days\"\n", &c);
  EXPECT_NE(s.message().find("retention"), absl::string_view::npos);
  s = LoadConfigText("flush = \"sometimes\"\n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = LoadConfigText("timer_thread_nice = -21\n", &c);
  EXPECT_NE(s.message().find("timer_thread_nice"), absl::string_view::npos);
  s = LoadConfigText("port = [\n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tokimq::broker
