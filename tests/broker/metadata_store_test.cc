// MetadataStore over a real RocksDB in a temp dir, and the topic record codec.
#include "broker/metadata_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "test_util.h"

namespace tokimq::broker {
namespace {

class MetadataStoreTest : public ::testing::Test {
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
    auto s = MetadataStore::Open(db_.get());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  static TopicConfig Topic(const std::string& name, TopicType type = TopicType::kDelay) {
    TopicConfig c;
    c.name = name;
    c.type = type;
    c.queues = 4;
    c.max_delay_ms = 7LL * 24 * 3600 * 1000;
    c.retention_ms = 3600 * 1000;
    c.created_ms = 1'700'000'000'000;
    return c;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<MetadataStore> store_;
};

TEST_F(MetadataStoreTest, CreatedTopicSurvivesReopen) {
  ASSERT_TRUE(store_->CreateTopic(Topic("orders.timeout")).ok());
  ASSERT_TRUE(store_->CreateTopic(Topic("a-normal", TopicType::kNormal)).ok());
  Reopen();
  auto t = store_->GetTopic("orders.timeout");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(*t, Topic("orders.timeout"));
  auto all = store_->ListTopics();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "a-normal");
  EXPECT_EQ(all[0].type, TopicType::kNormal);
}

TEST_F(MetadataStoreTest, DuplicateCreateIsAlreadyExists) {
  ASSERT_TRUE(store_->CreateTopic(Topic("t")).ok());
  EXPECT_EQ(store_->CreateTopic(Topic("t")).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(MetadataStoreTest, InvalidConfigsAreRefused) {
  TopicConfig c = Topic("bad name");
  EXPECT_EQ(store_->CreateTopic(c).code(), absl::StatusCode::kInvalidArgument);
  c = Topic("tokimq_sys_timer");
  EXPECT_EQ(store_->CreateTopic(c).code(), absl::StatusCode::kInvalidArgument);
  c = Topic("q0");
  c.queues = 0;
  EXPECT_EQ(store_->CreateTopic(c).code(), absl::StatusCode::kInvalidArgument);
  c = Topic("late");
  c.max_delay_ms = kMaxMaxDelayMs + 1;
  EXPECT_EQ(store_->CreateTopic(c).code(), absl::StatusCode::kInvalidArgument);
  c.max_delay_ms = kMaxMaxDelayMs;
  EXPECT_TRUE(store_->CreateTopic(c).ok());
  EXPECT_EQ(store_->CreateTopic(Topic(std::string(128, 'a'))).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(MetadataStoreTest, UpdateKeepsTypeAndOnlyGrowsQueues) {
  ASSERT_TRUE(store_->CreateTopic(Topic("t")).ok());
  TopicConfig c = Topic("t");
  c.queues = 8;
  c.max_delay_ms = 1000;
  ASSERT_TRUE(store_->UpdateTopic(c).ok());
  c.queues = 2;
  EXPECT_EQ(store_->UpdateTopic(c).code(), absl::StatusCode::kInvalidArgument);
  c.queues = 8;
  c.type = TopicType::kNormal;
  EXPECT_EQ(store_->UpdateTopic(c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->UpdateTopic(Topic("missing")).code(), absl::StatusCode::kNotFound);
  Reopen();
  EXPECT_EQ(store_->GetTopic("t")->queues, 8);
  EXPECT_EQ(store_->GetTopic("t")->max_delay_ms, 1000);
}

TEST_F(MetadataStoreTest, DeleteRemovesDurably) {
  ASSERT_TRUE(store_->CreateTopic(Topic("t")).ok());
  ASSERT_TRUE(store_->DeleteTopic("t").ok());
  EXPECT_EQ(store_->DeleteTopic("t").code(), absl::StatusCode::kNotFound);
  Reopen();
  EXPECT_FALSE(store_->GetTopic("t").has_value());
}

TEST_F(MetadataStoreTest, CorruptRecordRefusesOpenNamingTheKey) {
  ASSERT_TRUE(store_->CreateTopic(Topic("t")).ok());
  std::string v;
  ASSERT_TRUE(db_->Get(rocksdb::ReadOptions(), "topic/t", &v).ok());
  v[3] ^= 0x10;
  ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), "topic/t", v).ok());
  auto reopened = MetadataStore::Open(db_.get());
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(reopened.status().message().find("topic/t"), absl::string_view::npos);
}

TEST(TopicCodecTest, RoundTripAndCorruptionList) {
  TopicConfig c;
  c.name = "orders";
  c.type = TopicType::kFifo;
  c.queues = 16;
  c.max_delay_ms = 123;
  c.retention_ms = 456;
  c.created_ms = 789;
  std::string v = EncodeTopicValue(c);
  ASSERT_EQ(v.size(), 34u);
  EXPECT_EQ(*DecodeTopicValue("orders", v), c);
  // A value moved under another key fails: the CRC covers the name.
  EXPECT_EQ(DecodeTopicValue("orderz", v).status().code(), absl::StatusCode::kDataLoss);
  // Truncated at every length.
  for (size_t n = 0; n < v.size(); ++n) {
    EXPECT_EQ(DecodeTopicValue("orders", v.substr(0, n)).status().code(),
              absl::StatusCode::kDataLoss);
  }
  // Every single bit flip is caught.
  for (size_t i = 0; i < v.size() * 8; ++i) {
    std::string bad = v;
    bad[i / 8] = static_cast<char>(bad[i / 8] ^ (1 << (i % 8)));
    EXPECT_FALSE(DecodeTopicValue("orders", bad).ok()) << i;
  }
}

TEST(TopicTypeTest, ParsesNamesCaseInsensitively) {
  EXPECT_EQ(*ParseTopicType("delay"), TopicType::kDelay);
  EXPECT_EQ(*ParseTopicType("FIFO"), TopicType::kFifo);
  EXPECT_FALSE(ParseTopicType("queue").ok());
}

}  // namespace
}  // namespace tokimq::broker

namespace tokimq::broker {
namespace {

TEST(TopicCodecTest, MatchesWorkedExampleInDocs) {
  TopicConfig c;
  c.name = "orders.timeout";
  c.type = TopicType::kDelay;
  c.queues = 8;
  c.max_delay_ms = 604'800'000;
  c.retention_ms = 259'200'000;
  c.created_ms = 1'796'119'200'000;
  const unsigned char expected[] = {0x01, 0x02, 0x08, 0x00, 0x00, 0x00, 0x00, 0x84, 0x0c,
                                    0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x73, 0x0f,
                                    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0c, 0x31, 0xa2,
                                    0x01, 0x00, 0x00, 0x99, 0x5f, 0x46, 0x6d};
  EXPECT_EQ(EncodeTopicValue(c),
            std::string(reinterpret_cast<const char*>(expected), sizeof(expected)));
}

}  // namespace
}  // namespace tokimq::broker
