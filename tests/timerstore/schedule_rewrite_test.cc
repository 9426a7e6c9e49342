// RewriteForSchedule on an encoded properties section (the broker's send path since issue 21
// item 1, round 3) against the map path it had before: the CommitLog records are byte for byte
// the same, for a golden record (the bytes main stored for it, docs/formats/commitlog.md) and
// for many random property sets.
#include "schedule_rewrite.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "commitlog/property_section.h"
#include "commitlog/record.h"
#include "common/property_keys.h"
#include "timerstore/timer_store.h"

namespace tokimq {
namespace {

using Props = std::map<std::string, std::string>;

constexpr int64_t kNowMs = 1'700'000'000'000;
constexpr int64_t kDeliverMs = kNowMs + 3'600'000;

// A sent message as the broker builds it (born, body, destination), with no properties yet.
Message Sent() {
  Message m;
  m.topic = "orders";
  m.queue_id = 3;
  m.born_ms = kNowMs - 5;
  m.body = "order 42 timed out";
  return m;
}

// The record bytes as the CommitLog writes them (offsets and store time as the put sets them).
std::string Record(Message m) {
  m.queue_offset = QueueOffset(7);
  m.physical_offset = PhysicalOffset(4096);
  m.store_ms = kNowMs + 1;
  std::string out;
  record::Encode(m, &out);
  return out;
}

std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h += d[c >> 4];
    h += d[c & 15];
  }
  return h;
}

// The two paths for the same properties: the map (as main's broker built it) and the
// section encoded in one pass (record::EncodeProperties, as the broker builds it now).
Message ByMap(const Props& props) {
  Message m = Sent();
  m.properties = props;
  return m;
}
Message ByEncoded(const Props& props) {
  Message m = Sent();
  std::vector<record::PropertyPair> pairs;
  for (const auto& [k, v] : props) pairs.push_back({k, v});
  record::EncodeProperties(pairs, &m.encoded_properties);
  return m;
}

// A delayed send of a normal topic: key, tag, message id, one user property.
Props GoldenProps() {
  return {{prop::kKeys, "order-42"},
          {prop::kTag, "timeout"},
          {prop::kMessageId, "018bcfe9c3ff00c0ffee00000001"},
          {"shop", "eu-1"}};
}

// Written from main (12289b7): Record() of ByMap(GoldenProps()) after RewriteForSchedule
// (the map path, main's code). Fields, in the order of docs/formats/commitlog.md: magic,
// size, crc, flags, queue id 0, queue offset 7, physical offset 4096, born, store, topic
// "tokimq_sys_timer", the properties (KEYS, REAL_QID, REAL_TOPIC, TAGS, TIMER_DELIVER_MS,
// UNIQ_KEY, shop), body.
constexpr char kGoldenRecord[] =
    "014b54511101000007791651000000000000000007000000000000000010000000000000fb67e5cf8b010000"
    "0168e5cf8b0100001000746f6b696d715f7379735f74696d6572b1000000040000004b455953080000006f72"
    "6465722d3432080000005245414c5f51494401000000330a0000005245414c5f544f504943060000006f7264"
    "65727304000000544147530700000074696d656f75741000000054494d45525f44454c495645525f4d530d00"
    "00003137303030303336303030303008000000554e49515f4b45591c00000030313862636665396333666630"
    "3063306666656530303030303030310400000073686f700400000065752d31120000006f7264657220343220"
    "74696d6564206f7574";

TEST(ScheduleRewriteTest, EncodedSectionGivesTheGoldenRecordOfTheMapPath) {
  Message by_map = ByMap(GoldenProps());
  Message encoded = ByEncoded(GoldenProps());
  EXPECT_FALSE(RewriteForSchedule(&by_map, kDeliverMs, kNowMs));
  EXPECT_FALSE(RewriteForSchedule(&encoded, kDeliverMs, kNowMs));
  EXPECT_TRUE(encoded.properties.empty());  // stayed encoded: no map built
  EXPECT_EQ(encoded.topic, kTimerTopic);
  EXPECT_EQ(encoded.queue_id, 0);
  const std::string golden = Hex(Record(by_map));
  EXPECT_EQ(golden, kGoldenRecord);
  EXPECT_EQ(Hex(Record(encoded)), golden);
}

TEST(ScheduleRewriteTest, DueNowAddsOnlyTheDeliverTimeOnBothPaths) {
  Message by_map = ByMap(GoldenProps());
  Message encoded = ByEncoded(GoldenProps());
  EXPECT_TRUE(RewriteForSchedule(&by_map, kNowMs, kNowMs));
  EXPECT_TRUE(RewriteForSchedule(&encoded, kNowMs, kNowMs));
  EXPECT_EQ(encoded.topic, "orders");
  EXPECT_EQ(encoded.queue_id, 3);
  std::string_view deliver;
  ASSERT_TRUE(record::FindProperty(encoded.encoded_properties, prop::kDeliverMs, &deliver));
  EXPECT_EQ(deliver, std::to_string(kNowMs));
  EXPECT_EQ(Record(encoded), Record(by_map));
}

TEST(ScheduleRewriteTest, StoredTimerKeysAndADeleteMarkerKeyAreReplacedAsTheMapDid) {
  Props p = GoldenProps();
  p[prop::kRealTopic] = "spoofed";
  p[prop::kRealQueueId] = "99";
  p[prop::kDeliverMs] = "1";
  p[prop::kTimerDeleteOf] = "4096";
  Message by_map = ByMap(p);
  Message encoded = ByEncoded(p);
  RewriteForSchedule(&by_map, kDeliverMs, kNowMs);
  RewriteForSchedule(&encoded, kDeliverMs, kNowMs);
  std::string_view v;
  EXPECT_FALSE(record::FindProperty(encoded.encoded_properties, prop::kTimerDeleteOf, &v));
  ASSERT_TRUE(record::FindProperty(encoded.encoded_properties, prop::kRealTopic, &v));
  EXPECT_EQ(v, "orders");
  EXPECT_EQ(Record(encoded), Record(by_map));
}

TEST(ScheduleRewriteTest, RandomPropertySetsGiveTheSameRecordOnBothPaths) {
  std::mt19937 rng(21);
  const std::vector<std::string> keys = {prop::kKeys,
                                         prop::kTag,
                                         prop::kMessageId,
                                         prop::kMessageGroup,
                                         prop::kRealTopic,
                                         prop::kRealQueueId,
                                         prop::kDeliverMs,
                                         prop::kTimerDeleteOf,
                                         "A",
                                         "REAL",
                                         "REAL_Q",
                                         "TIMER",
                                         "TIMER_DELIVER_MS_",
                                         "a",
                                         "zz",
                                         "\x01",
                                         "\xff"};
  for (int round = 0; round < 2000; ++round) {
    Props p;
    const int n = static_cast<int>(rng() % 9);
    for (int i = 0; i < n; ++i) {
      p[keys[rng() % keys.size()]] = std::string(rng() % 20, static_cast<char>('a' + rng() % 26));
    }
    if (p.empty()) p[prop::kMessageId] = "id";  // the broker always sets one
    const int64_t deliver = kNowMs + static_cast<int64_t>(rng() % 3) - 1;
    Message by_map = ByMap(p);
    Message encoded = ByEncoded(p);
    Message sent = Sent();
    sent.queue_id = static_cast<int32_t>(rng() % 1000);
    by_map.queue_id = encoded.queue_id = sent.queue_id;
    EXPECT_EQ(RewriteForSchedule(&by_map, deliver, kNowMs),
              RewriteForSchedule(&encoded, deliver, kNowMs));
    ASSERT_EQ(Hex(Record(encoded)), Hex(Record(by_map))) << "round " << round;
  }
}

TEST(ScheduleRewriteTest, SectionOutOfKeyOrderFallsBackToTheMapWithTheSameResult) {
  // Not what our encoder writes (TAGS before KEYS): EditProperties refuses it, the map path
  // gives the record the map would.
  Message encoded = Sent();
  record::PropertyPair pairs[] = {{prop::kTag, "t"}, {prop::kKeys, "k"}};
  for (const auto& p : pairs) {
    encoded.encoded_properties += std::string(4, '\0');
    encoded.encoded_properties[encoded.encoded_properties.size() - 4] =
        static_cast<char>(p.key.size());
    encoded.encoded_properties += p.key;
    encoded.encoded_properties += std::string(4, '\0');
    encoded.encoded_properties[encoded.encoded_properties.size() - 4] =
        static_cast<char>(p.value.size());
    encoded.encoded_properties += p.value;
  }
  Message by_map = ByMap({{prop::kTag, "t"}, {prop::kKeys, "k"}});
  RewriteForSchedule(&encoded, kDeliverMs, kNowMs);
  RewriteForSchedule(&by_map, kDeliverMs, kNowMs);
  EXPECT_EQ(Record(encoded), Record(by_map));
}

}  // namespace
}  // namespace tokimq
