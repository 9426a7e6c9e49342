// GroupConfigStore over a real RocksDB in a temp dir, and the group record codec
// (docs/formats/metadata.md "group_config/<name> value").
#include "broker/group_config_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "test_util.h"

namespace tokimq::broker {
namespace {

constexpr int64_t kCreatedMs = 1'796'119'200'000;  // 2026-12-01T10:00:00Z

class GroupConfigStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    store_.reset();
    db_.reset();
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_.Join("meta"), &raw).ok());
    db_.reset(raw);
    auto s = GroupConfigStore::Open(db_.get());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  static GroupConfig Group(const std::string& name, DeliveryOrder order) {
    GroupConfig c;
    c.name = name;
    c.order = order;
    return c;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<GroupConfigStore> store_;
};

TEST_F(GroupConfigStoreTest, CreatedGroupAndItsOrderSurviveReopen) {
  ASSERT_TRUE(store_->Create(Group("GID_orders", DeliveryOrder::kOrderly), kCreatedMs).ok());
  ASSERT_TRUE(store_->Create(Group("GID_plain", DeliveryOrder::kConcurrently), 5).ok());
  Reopen();
  std::optional<GroupConfig> g = store_->Get("GID_orders");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->order, DeliveryOrder::kOrderly);
  EXPECT_EQ(g->created_ms, kCreatedMs);
  EXPECT_EQ(store_->OrderOf("GID_plain"), DeliveryOrder::kConcurrently);
  EXPECT_EQ(store_->OrderOf("never_created"), DeliveryOrder::kUnset);
}

TEST_F(GroupConfigStoreTest, UpdateChangesTheOrderAndKeepsCreationTime) {
  ASSERT_TRUE(store_->Create(Group("g", DeliveryOrder::kConcurrently), 7).ok());
  ASSERT_TRUE(store_->Update(Group("g", DeliveryOrder::kOrderly)).ok());
  Reopen();
  EXPECT_EQ(store_->OrderOf("g"), DeliveryOrder::kOrderly);
  EXPECT_EQ(store_->Get("g")->created_ms, 7);
}

TEST_F(GroupConfigStoreTest, RefusalsNameTheirCause) {
  ASSERT_TRUE(store_->Create(Group("g", DeliveryOrder::kOrderly), 1).ok());
  EXPECT_EQ(store_->Create(Group("g", DeliveryOrder::kOrderly), 1).code(),
            absl::StatusCode::kAlreadyExists);
  absl::Status missing = store_->Update(Group("nope", DeliveryOrder::kOrderly));
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(),
            "subscription group [nope] does not exist (create it with `tokimq group create`)");
  EXPECT_EQ(store_->Create(Group("a b", DeliveryOrder::kOrderly), 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Create(Group("u", DeliveryOrder::kUnset), 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Create(Group("x", static_cast<DeliveryOrder>(3)), 1).code(),
            absl::StatusCode::kInvalidArgument);
}

// The worked example of docs/formats/metadata.md.
TEST(GroupConfigCodecTest, WorkedExampleBytes) {
  GroupConfig c{"GID_orders", DeliveryOrder::kOrderly, kCreatedMs};
  const std::string v = EncodeGroupConfigValue(c);
  const std::string expected("\x01\x02\x00\x01\x0c\x31\xa2\x01\x00\x00\x8c\xa5\xc4\x91", 14);
  EXPECT_EQ(v, expected);
  absl::StatusOr<GroupConfig> back = DecodeGroupConfigValue("GID_orders", v);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
}

TEST(GroupConfigCodecTest, CorruptValuesAreDataLoss) {
  const std::string v =
      EncodeGroupConfigValue({"GID_orders", DeliveryOrder::kOrderly, kCreatedMs});
  auto code = [](const std::string& name, const std::string& value) {
    return DecodeGroupConfigValue(name, value).status().code();
  };
  EXPECT_EQ(code("GID_orders", v.substr(0, v.size() - 1)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code("GID_orders", v + "x"), absl::StatusCode::kDataLoss);
  std::string flipped = v;
  flipped[1] = 1;  // concurrently, CRC no longer matches
  EXPECT_EQ(code("GID_orders", flipped), absl::StatusCode::kDataLoss);
  // A value copied under another key: the CRC covers the name.
  EXPECT_EQ(code("GID_other", v), absl::StatusCode::kDataLoss);
  // Version and order outside their range, with a matching CRC.
  for (auto [version, order] : {std::pair<uint8_t, uint8_t>{2, 2}, {1, 0}, {1, 3}}) {
    std::string bad = v.substr(0, 10);
    bad[0] = static_cast<char>(version);
    bad[1] = static_cast<char>(order);
    PutFixed32(&bad, crc32c::Extend(crc32c::Value("GID_orders"), bad.data(), bad.size()));
    EXPECT_EQ(code("GID_orders", bad), absl::StatusCode::kDataLoss)
        << int(version) << " " << int(order);
  }
  // Every truncation of the value is refused.
  for (size_t n = 0; n < v.size(); ++n) {
    EXPECT_EQ(code("GID_orders", v.substr(0, n)), absl::StatusCode::kDataLoss) << n;
  }
}

}  // namespace
}  // namespace tokimq::broker
