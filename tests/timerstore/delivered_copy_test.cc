// DeliveredCopy (properties as record bytes, one pass) against DeliveredCopyByMap (the map
// path it replaced, kept as its fallback): the CommitLog records they encode to are compared
// byte for byte over many property sets.
#include "delivered_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/coding.h"
#include "timerstore/timer_store.h"

namespace tokimq {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

constexpr int64_t kDeliverMs = 1'700'000'123'456;

// Properties section bytes of `pairs`, in the order given (duplicates and any order allowed).
std::string Section(const Pairs& pairs) {
  std::string out;
  for (const auto& [k, v] : pairs) {
    PutLengthPrefixed(&out, k);
    PutLengthPrefixed(&out, v);
  }
  return out;
}

// The properties every timer-topic record of the unit carries.
Pairs Required() {
  return {{prop::kRealQueueId, "3"},
          {prop::kRealTopic, "orders"},
          {prop::kDeliverMs, std::to_string(kDeliverMs)}};
}

Pairs Sorted(Pairs p) {
  std::stable_sort(p.begin(), p.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return p;
}

ScheduledUnit Unit(uint32_t roll_count) {
  ScheduledUnit su;
  su.pos = TimerLogPosition(7 * 72);
  su.unit.write_ms = 1'700'000'000'001;
  su.unit.deliver_ms = kDeliverMs;
  su.unit.physical_offset = PhysicalOffset(123'456'789);
  su.unit.roll_count = roll_count;
  return su;
}

class DeliveredCopyTest : public ::testing::Test {
 protected:
  static constexpr int64_t kNow = 1'700'000'123'460;

  // A timer-topic record with exactly `pairs` as its property bytes (in that order).
  const record::RecordView& Record(const Pairs& pairs, std::string topic = kTimerTopic) {
    Message m;
    m.topic = std::move(topic);
    m.queue_id = 0;
    m.queue_offset = QueueOffset(41);
    m.physical_offset = PhysicalOffset(123'456'789);
    m.born_ms = 1'699'999'999'000;
    m.store_ms = 1'700'000'000'000;
    m.flags = kFlagIndexed;
    m.encoded_properties = Section(pairs);
    m.body = std::string("body\0\xff", 6);
    bytes_.clear();
    record::Encode(m, &bytes_);
    EXPECT_TRUE(record::DecodeView(bytes_, &view_).ok());
    return view_;
  }

  // The record PutBatch writes for `copy` (fields the CommitLog assigns fixed).
  static std::string Put(Message copy) {
    copy.queue_offset = QueueOffset(5);
    copy.physical_offset = PhysicalOffset(1 << 20);
    copy.store_ms = kNow + 1;
    copy.flags |= kFlagIndexed;
    std::string rec(copy.EncodedSize(), '\0');
    record::EncodeTo(copy, rec.size(), rec.data());
    return rec;
  }

  // Both builders over `pairs` give the same record; returns whether DeliveredCopy took the
  // one-pass path (its copy carries encoded_properties).
  bool ExpectSameRecord(const Pairs& pairs, uint32_t roll_count) {
    const record::RecordView& v = Record(pairs);
    const ScheduledUnit su = Unit(roll_count);
    std::optional<Message> fast = DeliveredCopy(v, su, kNow);
    std::optional<Message> by_map = DeliveredCopyByMap(v, su, kNow);
    EXPECT_TRUE(fast.has_value());
    EXPECT_TRUE(by_map.has_value());
    if (!fast || !by_map) return false;
    EXPECT_TRUE(by_map->encoded_properties.empty());
    EXPECT_EQ(Put(*fast), Put(*by_map)) << "roll_count " << roll_count;
    const bool one_pass = !fast->encoded_properties.empty();
    EXPECT_TRUE(!one_pass || fast->properties.empty());
    return one_pass;
  }

  std::string bytes_;
  record::RecordView view_;
};

TEST_F(DeliveredCopyTest, OnlyTheRequiredProperties) {
  for (uint32_t roll : {0u, 1u, 7u}) EXPECT_TRUE(ExpectSameRecord(Required(), roll));
  // And what the copy holds: real destination, timer properties, record's other fields.
  const record::RecordView& v = Record(Required());
  std::optional<Message> m = DeliveredCopy(v, Unit(2), kNow);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->topic, "orders");
  EXPECT_EQ(m->queue_id, 3);
  EXPECT_EQ(m->born_ms, v.born_ms);
  EXPECT_EQ(m->flags, v.flags);
  EXPECT_EQ(m->body, v.body);
  std::map<std::string, std::string> props;
  ASSERT_TRUE(record::DecodeProperties(m->encoded_properties, &props));
  EXPECT_EQ(props,
            (std::map<std::string, std::string>{{prop::kDeliverMs, std::to_string(kDeliverMs)},
                                                {prop::kTimerDequeueMs, std::to_string(kNow)},
                                                {prop::kTimerEnqueueMs, "1700000000001"},
                                                {prop::kTimerRollCount, "2"},
                                                {kTimerSourceOffset, "123456789"},
                                                {prop::kTimerUnitPos, "504"}}));
}

TEST_F(DeliveredCopyTest, StoredTimerKeysAreReplaced) {
  Pairs p = Required();
  p.insert(p.end(), {{prop::kTimerEnqueueMs, "1"},
                     {prop::kTimerDequeueMs, "2"},
                     {prop::kTimerUnitPos, "3"},
                     {kTimerSourceOffset, "4"},
                     {prop::kTimerRollCount, "5"}});
  // roll_count 0 keeps the stored TIMER_ROLL_TIMES; > 0 replaces it.
  for (uint32_t roll : {0u, 1u, 9u}) EXPECT_TRUE(ExpectSameRecord(Sorted(p), roll));
}

TEST_F(DeliveredCopyTest, KeysBeforeBetweenAndAfterTheTimerKeys) {
  Pairs p = Required();
  p.insert(p.end(), {{"", "empty key"},
                     {"A", "before"},
                     {"KEYS", "k1 k2"},
                     {"REAL_QIC", "just before REAL_QID"},
                     {"REAL_QIE", "between REAL_QID and REAL_TOPIC"},
                     {"REAL_TOPICS", "just after REAL_TOPIC"},
                     {"TAGS", "tag"},
                     {"TIMER_DELETE", "between DELIVER and DEQUEUE"},
                     {"TIMER_E", "before ENQUEUE"},
                     {"TIMER_ENQUEUE_MT", "after ENQUEUE"},
                     {"TIMER_RA", "before ROLL"},
                     {"TIMER_S", "between ROLL and SRC"},
                     {"TIMER_T", "between SRC and UNIT"},
                     {"TIMER_UNIT_POSX", "after UNIT_POS"},
                     {"UNIQ_KEY", "id-1"},
                     {"zz", "after all"},
                     {std::string("\xff\x00", 2), "high byte: last in byte order"}});
  for (uint32_t roll : {0u, 3u}) EXPECT_TRUE(ExpectSameRecord(Sorted(p), roll));
}

TEST_F(DeliveredCopyTest, EmptyAndBinaryValues) {
  Pairs p = Required();
  p.insert(p.end(), {{"A", ""},
                     {"B", std::string("\0\0\0", 3)},
                     {"C", std::string("\xff\x80\x7f\x01", 4)},
                     {"TAGS", ""},
                     {prop::kTimerUnitPos, ""},
                     {"Z", std::string(1000, '\x11')}});
  for (uint32_t roll : {0u, 1u}) EXPECT_TRUE(ExpectSameRecord(Sorted(p), roll));
}

TEST_F(DeliveredCopyTest, DuplicateKeysKeepTheFirst) {
  Pairs p = Required();
  p.insert(p.end(), {{"A", "first"},
                     {"A", "second"},
                     {prop::kRealTopic, "second-topic"},  // dropped, and not the destination
                     {prop::kTimerRollCount, "1"},
                     {prop::kTimerRollCount, "2"},  // roll 0: the first one stays
                     {prop::kTimerUnitPos, "x"},
                     {prop::kTimerUnitPos, "y"},
                     {"ZZ", "a"},
                     {"ZZ", "b"},
                     {"ZZ", "c"}});
  const Pairs sorted = Sorted(p);  // stable: first stays first
  for (uint32_t roll : {0u, 2u}) EXPECT_TRUE(ExpectSameRecord(sorted, roll));
  std::optional<Message> m = DeliveredCopy(Record(sorted), Unit(0), kNow);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->topic, "orders");
  std::string_view v;
  ASSERT_TRUE(record::FindProperty(m->encoded_properties, "A", &v));
  EXPECT_EQ(v, "first");
  ASSERT_TRUE(record::FindProperty(m->encoded_properties, prop::kTimerRollCount, &v));
  EXPECT_EQ(v, "1");
}

TEST_F(DeliveredCopyTest, UnsortedPropertiesFallBackToTheMapPath) {
  Pairs p = Required();
  p.insert(p.end(), {{"ZZ", "z"}, {"A", "a"}, {prop::kTimerUnitPos, "old"}, {"A", "a2"}});
  for (uint32_t roll : {0u, 4u}) EXPECT_FALSE(ExpectSameRecord(p, roll));
  Pairs reversed = Sorted(Required());
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_FALSE(ExpectSameRecord(reversed, 0));
}

TEST_F(DeliveredCopyTest, RecordNotTheUnitsGivesNoCopyEitherWay) {
  auto expect_none = [&](const record::RecordView& v) {
    EXPECT_FALSE(DeliveredCopy(v, Unit(0), kNow).has_value());
    EXPECT_FALSE(DeliveredCopyByMap(v, Unit(0), kNow).has_value());
  };
  expect_none(Record(Required(), "orders"));  // not the timer topic
  expect_none(Record({{prop::kRealQueueId, "3"}, {prop::kRealTopic, "orders"}}));
  expect_none(Record({{prop::kRealQueueId, "3"},
                      {prop::kRealTopic, "orders"},
                      {prop::kDeliverMs, std::to_string(kDeliverMs + 1)}}));
  expect_none(Record({{prop::kRealQueueId, "3"}, {prop::kDeliverMs, std::to_string(kDeliverMs)}}));
  expect_none(Record({{prop::kRealQueueId, "3x"},
                      {prop::kRealTopic, "orders"},
                      {prop::kDeliverMs, std::to_string(kDeliverMs)}}));
  expect_none(Record({}));
}

// Random property sets from a pool of keys around and equal to the timer keys, with empty and
// binary values and duplicates; most sorted (the one-pass path), some not (the fallback).
TEST_F(DeliveredCopyTest, RandomPropertySetsGiveTheSameRecord) {
  std::mt19937 rng(1130);
  const std::vector<std::string> pool = {"",
                                         "A",
                                         "KEYS",
                                         "MSG_GROUP",
                                         "REAL_QI",
                                         prop::kRealQueueId,
                                         "REAL_QIDS",
                                         prop::kRealTopic,
                                         "TAGS",
                                         "TIMER_",
                                         prop::kDeliverMs,
                                         prop::kTimerDequeueMs,
                                         prop::kTimerEnqueueMs,
                                         "TIMER_M",
                                         prop::kTimerRollCount,
                                         kTimerSourceOffset,
                                         prop::kTimerUnitPos,
                                         "TIMER_UNIT_POS_",
                                         "UNIQ_KEY",
                                         "zz",
                                         std::string("\x80", 1),
                                         std::string("\xff", 1)};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto value = [&] {
    std::string v(pick(6), '\0');
    for (char& c : v) c = static_cast<char>(rng());
    return v;
  };
  int one_pass = 0, fallback = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    // The required ones first, so the record is the unit's (the first of duplicates counts).
    Pairs p = Required();
    const size_t n = pick(12);
    for (size_t i = 0; i < n; ++i) p.emplace_back(pool[pick(pool.size())], value());
    const bool sort = pick(5) != 0;
    if (sort) p = Sorted(p);
    const uint32_t roll = pick(2) == 0 ? 0 : static_cast<uint32_t>(1 + pick(100));
    const bool took_one_pass = ExpectSameRecord(p, roll);
    if (sort) {
      EXPECT_TRUE(took_one_pass) << "iteration " << iter;
    }
    (took_one_pass ? one_pass : fallback)++;
    if (HasFailure()) break;
  }
  EXPECT_GT(one_pass, 2000);
  EXPECT_GT(fallback, 100);
}

}  // namespace
}  // namespace tokimq
