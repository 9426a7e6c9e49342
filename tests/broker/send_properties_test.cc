// EncodeSendProperties (the send path's properties section, built in one pass without a map)
// against the std::map the broker built before (issue 21 item 1, round 3): the same section
// for random entries, and the same CommitLog record bytes stored by a real Broker for delayed,
// FIFO and immediate sends (read back from the segment file).
#include "send_properties.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "broker/broker.h"
#include "commitlog/record.h"
#include "common/property_keys.h"
#include "proto/tokimq.pb.h"
#include "test_util.h"
#include "timerstore/recall_handle.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker {
namespace {

using Props = std::map<std::string, std::string>;

// The map main's PrepareSend built for `e` (broker/src/send_handler.cc before round 3).
Props MapOf(const proto::SendEntry& e, const std::string* group, const std::string& id) {
  Props m;
  for (const auto& [k, v] : e.properties()) m[k] = v;
  if (!e.key().empty()) m[prop::kKeys] = e.key();
  if (!e.tag().empty()) m[prop::kTag] = e.tag();
  if (group != nullptr) m[prop::kMessageGroup] = *group;
  m[prop::kMessageId] = id;
  return m;
}

std::string SectionOf(const Props& props) {
  Message m;
  m.properties = props;
  std::string rec;
  record::Encode(m, &rec);
  record::RecordView v;
  EXPECT_TRUE(record::DecodeView(rec, &v).ok());
  return std::string(v.properties);
}

TEST(SendPropertiesTest, RandomEntriesGiveTheSectionOfTheMap) {
  std::mt19937 rng(21);
  const std::vector<std::string> keys = {
      prop::kKeys, prop::kTag, prop::kMessageId,    "a", "b", "KEYS_", "TAG",
      "UNIQ",      "z",        "\xc3\xa9t\xc3\xa9", ""};
  for (int round = 0; round < 3000; ++round) {
    proto::SendEntry e;
    const int n = static_cast<int>(rng() % 25);  // past the insertion sort's 16 too
    for (int i = 0; i < n; ++i) {
      std::string k = keys[rng() % keys.size()] + std::to_string(rng() % (i % 3 == 0 ? 1 : 40));
      (*e.mutable_properties())[k] = std::string(rng() % 30, static_cast<char>('a' + i % 26));
    }
    if (rng() % 2) e.set_key("order-" + std::to_string(rng() % 100));
    if (rng() % 2) e.set_tag("tag" + std::to_string(rng() % 10));
    const std::string group = "g" + std::to_string(rng() % 5);
    const std::string* g = rng() % 2 ? &group : nullptr;
    const std::string id = "018bcfe9c3ff00c0ffee" + std::to_string(10'000'000 + round);
    std::string encoded = "left over";
    EncodeSendProperties(e, g, id, &encoded);
    ASSERT_EQ(encoded, SectionOf(MapOf(e, g, id))) << "round " << round;
  }
}

TEST(SendPropertiesTest, EntryPropertiesNamedLikeTheBrokersAreReplacedAsTheMapDid) {
  proto::SendEntry e;
  (*e.mutable_properties())[prop::kKeys] = "user keys";
  (*e.mutable_properties())[prop::kTag] = "user tag";
  (*e.mutable_properties())[prop::kMessageId] = "user id";
  e.set_key("k");  // no tag: the entry's TAGS property stays
  const std::string id = "the id";
  std::string encoded;
  EncodeSendProperties(e, nullptr, id, &encoded);
  EXPECT_EQ(encoded, SectionOf(MapOf(e, nullptr, id)));
  std::string_view v;
  ASSERT_TRUE(record::FindProperty(encoded, prop::kKeys, &v));
  EXPECT_EQ(v, "k");
  ASSERT_TRUE(record::FindProperty(encoded, prop::kTag, &v));
  EXPECT_EQ(v, "user tag");
  ASSERT_TRUE(record::FindProperty(encoded, prop::kMessageId, &v));
  EXPECT_EQ(v, "the id");
}

class StoredSendRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BrokerOptions o;
    o.data_dir = dir_.path();
    o.manual_clock = true;
    o.manual_clock_start_ms = kStartMs;
    o.timer_window_ms = 3'600'000 * 4;
    o.timer_thread_nice = 0;
    o.retention_interval_ms = 0;
    o.commitlog_segment_size = 1 << 20;
    auto b = Broker::Open(o);
    ASSERT_TRUE(b.ok()) << b.status();
    broker_ = std::move(*b);
    using Topic = std::pair<const char*, proto::TopicType>;
    for (auto [name, type] : {Topic{"orders", proto::NORMAL}, Topic{"fifo", proto::FIFO}}) {
      proto::Request create;
      create.mutable_create_topic()->mutable_topic()->set_name(name);
      create.mutable_create_topic()->mutable_topic()->set_queues(1);
      create.mutable_create_topic()->mutable_topic()->set_type(type);
      proto::Response created = Call(create);
      ASSERT_EQ(created.status().code(), 0) << created.status().message();
    }
  }

  proto::Response Call(const proto::Request& req) {
    proto::Response resp;
    broker_->Handle(req, &resp);
    return resp;
  }

  // The record stored at `offset` in the first CommitLog segment, as bytes on disk.
  std::string StoredRecord(int64_t offset) {
    const std::string path = dir_.path() + "/store/commitlog/00000000000000000000";
    int fd = ::open(path.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0) << path;
    char prefix[record::kPrefixSize];
    EXPECT_EQ(::pread(fd, prefix, sizeof(prefix), offset), static_cast<ssize_t>(sizeof(prefix)));
    std::string rec(record::DecodePrefix(prefix).total_size, '\0');
    EXPECT_EQ(::pread(fd, rec.data(), rec.size(), offset), static_cast<ssize_t>(rec.size()));
    ::close(fd);
    return rec;
  }

  static constexpr int64_t kStartMs = 1'700'000'000'000;
  testing::TempDir dir_;
  std::unique_ptr<Broker> broker_;
};

TEST_F(StoredSendRecordTest, DelayedAndImmediateSendsStoreTheRecordsOfTheMapPath) {
  proto::Request req;
  proto::SendEntry* delayed = req.mutable_send()->add_entries();
  delayed->set_topic("orders");
  delayed->set_body("order 42 timed out");
  delayed->set_key("order-42");
  delayed->set_tag("timeout");
  delayed->set_born_ms(kStartMs - 5);
  delayed->set_delay_ms(3'600'000);
  (*delayed->mutable_properties())["shop"] = "eu-1";
  (*delayed->mutable_properties())["A"] = "first";
  proto::SendEntry* fifo = req.mutable_send()->add_entries();
  *fifo = *delayed;
  fifo->set_topic("fifo");
  fifo->set_message_group("cart-7");
  proto::SendEntry* now = req.mutable_send()->add_entries();
  *now = *delayed;
  now->clear_delay_ms();
  proto::Response resp = Call(req);
  ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
  ASSERT_EQ(resp.send().results_size(), 3);

  int64_t next_offset = -1;  // the immediate one follows the two delayed ones
  for (int i = 0; i < 3; ++i) {
    const proto::SendEntry& e = req.send().entries(i);
    const proto::SendResult& r = resp.send().results(i);
    // main's message: the map, then (delayed) main's timer rewrite.
    const std::string group = e.message_group();
    Message m;
    m.topic = e.topic();
    m.queue_id = r.queue_id();
    m.born_ms = e.born_ms();
    m.store_ms = kStartMs;
    m.flags = kFlagIndexed;  // set by the MessageStore's put, as on main
    m.queue_offset = QueueOffset(r.queue_offset());
    m.properties = MapOf(e, i == 1 ? &group : nullptr, r.message_id());
    m.body = e.body();
    int64_t offset = next_offset;
    if (i < 2) {
      m.properties[prop::kDeliverMs] = std::to_string(r.deliver_at_ms());
      ASSERT_TRUE(r.delayed());
      absl::StatusOr<RecallHandle> h = RecallHandle::Decode(r.recall_handle());
      ASSERT_TRUE(h.ok()) << h.status();
      offset = h->physical_offset.value();
      m.properties[prop::kRealTopic] = m.topic;
      m.properties[prop::kRealQueueId] = std::to_string(m.queue_id);
      m.topic = kTimerTopic;
      m.queue_id = 0;
    } else {
      ASSERT_FALSE(r.delayed());
    }
    ASSERT_GE(offset, 0);
    m.physical_offset = PhysicalOffset(offset);
    std::string expected;
    record::Encode(m, &expected);
    const std::string stored = StoredRecord(offset);
    EXPECT_EQ(stored, expected) << "entry " << i;
    next_offset = offset + static_cast<int64_t>(stored.size());
  }
}

}  // namespace
}  // namespace tokimq::broker
