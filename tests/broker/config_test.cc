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
timer_realtime_priority = 0
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
  EXPECT_EQ(c.broker.timer_realtime_priority, 0);
  EXPECT_EQ(BrokerConfig().broker.timer_realtime_priority, 1);  // the default
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

// A message of the max size must fit one receive answer: a config where
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

TEST(ConfigTest, TransactionKeys) {
  BrokerConfig c;
  ASSERT_TRUE(LoadConfigText("transaction_immunity = \"10s\"\ntransaction_check_interval = "
                             "\"1m\"\ntransaction_max_checks = 3\n",
                             &c)
                  .ok());
  EXPECT_EQ(c.broker.transaction_immunity_ms, 10'000);
  EXPECT_EQ(c.broker.transaction_check_interval_ms, 60'000);
  EXPECT_EQ(c.broker.transaction_max_checks, 3);
  BrokerConfig defaults;
  ASSERT_TRUE(LoadConfigText("", &defaults).ok());
  EXPECT_EQ(defaults.broker.transaction_immunity_ms, 6'000);
  EXPECT_EQ(defaults.broker.transaction_check_interval_ms, 30'000);
  EXPECT_EQ(defaults.broker.transaction_max_checks, 15);
  BrokerConfig bad;
  EXPECT_FALSE(LoadConfigText("transaction_max_checks = 0\n", &bad).ok());
  EXPECT_FALSE(LoadConfigText("transaction_immunity = \"2h\"\n", &bad).ok());
}

// `replication` given explicitly, async included, makes a broker group member that logs its
// consumer-group state (docs/replication.md "Consumer-group state"); left unset, a broker id
// 0 is a single node.
TEST(ConfigTest, ExplicitReplicationModeMakesAGroupMember) {
  for (const char* mode : {"async", "sync"}) {
    BrokerConfig c;
    absl::Status s = LoadConfigText(std::string("replication = \"") + mode + "\"\n", &c);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(c.broker.replication_explicit) << mode;
    EXPECT_EQ(c.broker.replication_sync, std::string(mode) == "sync");
  }
  BrokerConfig unset;
  ASSERT_TRUE(LoadConfigText("broker_id = 0\n", &unset).ok());
  EXPECT_FALSE(unset.broker.replication_explicit);
  EXPECT_FALSE(unset.broker.replication_sync);
  BrokerConfig bad;
  EXPECT_EQ(LoadConfigText("replication = \"semi\"\n", &bad).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(bad.broker.replication_explicit);
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
  s = LoadConfigText("timer_realtime_priority = 100\n", &c);
  EXPECT_NE(s.message().find("timer_realtime_priority"), absl::string_view::npos);
  s = LoadConfigText("port = [\n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// fuzz/config: integer keys went through toml++'s float -> int64 conversion, undefined for a
// float out of range ("port = 9e100"); integers and durations now take TOML integers only.
TEST(ConfigTest, FloatsAreNotIntegersOrDurations) {
  for (const char* text : {"port = 80.0\n", "port = 9e100\n", "io_threads = 2.0\n",
                           "retention = 1e300\n", "timer_precision = 100.0\n",
                           "[group.g]\nbackoff = [1000.0]\n", "port = nan\n"}) {
    BrokerConfig c;
    absl::Status s = LoadConfigText(text, &c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find("expected"), absl::string_view::npos) << text;
  }
  BrokerConfig c;
  ASSERT_TRUE(LoadConfigText("port = 80\nretention = 1000\n", &c).ok());
  EXPECT_EQ(c.server.port, 80);
  EXPECT_EQ(c.broker.default_retention_ms, 1000);
}

TEST(ConfigTest, DiskWatermarkKeys) {
  BrokerConfig c;
  EXPECT_EQ(c.broker.disk_min_free_bytes, 0u);  // defaults: RocketMQ's 90 % used
  EXPECT_DOUBLE_EQ(c.broker.disk_max_used_ratio, 0.9);
  absl::Status s = LoadConfigText(R"(
disk_min_free = 536870912
disk_max_used_ratio = 0.85
disk_check_interval = "250ms"
)",
                                  &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.broker.disk_min_free_bytes, 512u << 20);
  EXPECT_DOUBLE_EQ(c.broker.disk_max_used_ratio, 0.85);
  EXPECT_EQ(c.broker.disk_check_interval_ms, 250);
  s = LoadConfigText("disk_max_used_ratio = 1.5\n", &c);
  EXPECT_NE(s.message().find("disk_max_used_ratio"), absl::string_view::npos) << s;
  s = LoadConfigText("disk_min_free = -1\n", &c);
  EXPECT_NE(s.message().find("disk_min_free"), absl::string_view::npos) << s;
  s = LoadConfigText("disk_check_interval = 0\n", &c);
  EXPECT_NE(s.message().find("disk_check_interval"), absl::string_view::npos) << s;
}

TEST(ConfigTest, LogFormatIsTextOrJson) {
  BrokerConfig c;
  EXPECT_EQ(c.log_format, "text");
  ASSERT_TRUE(LoadConfigText("log_format = \"json\"\n", &c).ok());
  EXPECT_EQ(c.log_format, "json");
  absl::Status s = LoadConfigText("log_format = \"xml\"\n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("log_format"), std::string::npos) << s;
  EXPECT_EQ(c.log_format, "json");  // unchanged by the refused value
}

}  // namespace
}  // namespace tokimq::broker

namespace tokimq::broker {
namespace {

TEST(ConfigTest, HttpPortKey) {
  EXPECT_EQ(BrokerConfig().http_port, -1);  // the default: 9464, skipped when taken
  BrokerConfig c;
  ASSERT_TRUE(LoadConfigText("http_port = 9100\n", &c).ok());
  EXPECT_EQ(c.http_port, 9100);
  ASSERT_TRUE(LoadConfigText("http_port = 0\n", &c).ok());  // off
  EXPECT_EQ(c.http_port, 0);
  absl::Status s = LoadConfigText("http_port = 70000\n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("http_port"), std::string::npos) << s;
}

TEST(ConfigTest, AuthKeys) {
  BrokerConfig c;
  ASSERT_TRUE(LoadConfigText("auth = true\nauth_init_user = \"root:root-secret\"\n", &c).ok());
  EXPECT_TRUE(c.broker.auth);
  EXPECT_EQ(c.broker.auth_init_user, "root:root-secret");
  EXPECT_FALSE(LoadConfigText("auth = \"yes\"\n", &c).ok());
}

TEST(ConfigTest, TlsModeDefaultsToPermissiveWithACertificate) {
  BrokerConfig c;
  ASSERT_TRUE(ResolveTls(&c).ok());
  EXPECT_EQ(c.server.tls_mode, TlsMode::kDisabled);
  ASSERT_TRUE(LoadConfigText("tls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n", &c).ok());
  ASSERT_TRUE(ResolveTls(&c).ok());
  EXPECT_EQ(c.server.tls_mode, TlsMode::kPermissive);
  c.tls_mode = "enforcing";
  ASSERT_TRUE(ResolveTls(&c).ok());
  EXPECT_EQ(c.server.tls_mode, TlsMode::kEnforcing);
  c.tls_mode = "strict";
  EXPECT_EQ(ResolveTls(&c).code(), absl::StatusCode::kInvalidArgument);
  BrokerConfig no_cert;
  no_cert.tls_mode = "enforcing";
  EXPECT_EQ(ResolveTls(&no_cert).code(), absl::StatusCode::kInvalidArgument);
  BrokerConfig half;
  half.server.tls_cert_file = "c.pem";
  EXPECT_EQ(ResolveTls(&half).code(), absl::StatusCode::kInvalidArgument);
}

// docs/replication.md "TLS between members": a follower uses TLS to its leader when its own
// server enforces TLS, unless replication_tls says otherwise; the CA file and server name are
// refused without it.
TEST(ConfigTest, ReplicationTlsFollowsTheEnforcingModeUnlessGiven) {
  const std::string tls = "tls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n";
  BrokerConfig plain;
  ASSERT_TRUE(ResolveTls(&plain).ok());
  EXPECT_EQ(plain.broker.replication_tls, std::optional<bool>(false));
  BrokerConfig permissive;
  ASSERT_TRUE(LoadConfigText(tls, &permissive).ok());
  ASSERT_TRUE(ResolveTls(&permissive).ok());
  EXPECT_EQ(permissive.broker.replication_tls, std::optional<bool>(false));
  BrokerConfig enforcing;
  ASSERT_TRUE(LoadConfigText(tls + "tls_mode = \"enforcing\"\nreplication_tls_ca = \"ca.pem\"\n"
                             "replication_tls_server_name = \"mq.example.com\"\n",
                             &enforcing)
                  .ok());
  ASSERT_TRUE(ResolveTls(&enforcing).ok());
  EXPECT_EQ(enforcing.broker.replication_tls, std::optional<bool>(true));
  EXPECT_EQ(enforcing.broker.replication_tls_ca_file, "ca.pem");
  EXPECT_EQ(enforcing.broker.replication_tls_server_name, "mq.example.com");
  BrokerConfig off;
  ASSERT_TRUE(
      LoadConfigText(tls + "tls_mode = \"enforcing\"\nreplication_tls = false\n", &off).ok());
  ASSERT_TRUE(ResolveTls(&off).ok());
  EXPECT_EQ(off.broker.replication_tls, std::optional<bool>(false));
  BrokerConfig on;
  ASSERT_TRUE(LoadConfigText("replication_tls = true\n", &on).ok());
  ASSERT_TRUE(ResolveTls(&on).ok());
  EXPECT_EQ(on.broker.replication_tls, std::optional<bool>(true));
  BrokerConfig ca_without_tls;
  ASSERT_TRUE(LoadConfigText("replication_tls_ca = \"ca.pem\"\n", &ca_without_tls).ok());
  EXPECT_EQ(ResolveTls(&ca_without_tls).code(), absl::StatusCode::kInvalidArgument);
  BrokerConfig bad;
  EXPECT_FALSE(LoadConfigText("replication_tls = \"yes\"\n", &bad).ok());
}

TEST(ConfigTest, LoopbackBindAddresses) {
  EXPECT_TRUE(IsLoopbackBind("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackBind("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackBind("::1"));
  EXPECT_TRUE(IsLoopbackBind("localhost"));
  EXPECT_FALSE(IsLoopbackBind("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackBind("::"));
  EXPECT_FALSE(IsLoopbackBind("10.0.0.7"));
}

}  // namespace
}  // namespace tokimq::broker
