// Group-state record codecs: keys and values.
#include <gtest/gtest.h>

#include "consumer/group_state.h"

namespace tokimq::consumer {
namespace {

QueueKey Q() { return QueueKey{"grp", "orders", "%RETRY%grp", 3}; }

// Every single-bit flip of `v` is kDataLoss and every truncation fails, for `decode(key, v)`.
template <typename Decode>
void ExpectEveryFlipAndCutRefused(Decode decode, const std::string& key, const std::string& v) {
  for (size_t i = 0; i < v.size() * 8; ++i) {
    std::string bad = v;
    bad[i / 8] = static_cast<char>(bad[i / 8] ^ (1 << (i % 8)));
    EXPECT_EQ(decode(key, bad).status().code(), absl::StatusCode::kDataLoss) << "bit " << i;
  }
  for (size_t n = 0; n < v.size(); ++n) {
    EXPECT_FALSE(decode(key, v.substr(0, n)).ok()) << "cut at " << n;
  }
}

TEST(GroupStateKeys, RoundTripAndSortByOffset) {
  std::string k = LeaseKey(Q(), 42);
  EXPECT_EQ(k, "group/grp/l/orders/%RETRY%grp/3/00000000000000000042");
  auto pk = ParseKey(k);
  ASSERT_TRUE(pk.has_value());
  EXPECT_EQ(pk->kind, ParsedKey::kLease);
  EXPECT_EQ(pk->queue, Q());
  EXPECT_EQ(pk->queue_offset, 42);
  EXPECT_LT(LeaseKey(Q(), 9), LeaseKey(Q(), 10));
  auto pp = ParseKey(ProgressKey(Q()));
  ASSERT_TRUE(pp.has_value());
  EXPECT_EQ(pp->kind, ParsedKey::kProgress);
  EXPECT_EQ(pp->queue, Q());
  EXPECT_EQ(ParseKey(PolicyKey("grp"))->kind, ParsedKey::kPolicy);
  EXPECT_EQ(ParseKey(kLeaseTopicOffsetKey)->kind, ParsedKey::kLeaseTopicOffset);
  EXPECT_FALSE(ParseKey("group/grp/x/y").has_value());
  EXPECT_FALSE(ParseKey("group/grp/l/orders/r/3/42").has_value());
  EXPECT_FALSE(ParseKey("group/grp/p/orders/r/-1").has_value());
}

// fuzz/group_state: ParseKey took a queue id with leading zeros ("03") or "-0" and a "-0..."
// offset, so one queue had several keys; the grammar (docs/formats/group-state.md) allows one.
TEST(GroupStateKeys, OnlyTheCanonicalSpellingOfANumberParses) {
  EXPECT_TRUE(ParseKey("group/grp/p/orders/r/0").has_value());
  EXPECT_TRUE(ParseKey("group/grp/p/orders/r/30").has_value());
  EXPECT_FALSE(ParseKey("group/grp/p/orders/r/03").has_value());
  EXPECT_FALSE(ParseKey("group/grp/p/orders/r/00").has_value());
  EXPECT_FALSE(ParseKey("group/grp/p/orders/r/-0").has_value());
  EXPECT_FALSE(ParseKey("group/grp/p/orders/r/+3").has_value());
  EXPECT_FALSE(ParseKey("group/grp/b/orders/r/00000000000000000003/00000000000000000040").has_value());
  EXPECT_FALSE(ParseKey("group/grp/l/orders/r/3/-0000000000000000000").has_value());
  EXPECT_TRUE(ParseKey("group/grp/l/orders/r/3/00000000000000000000").has_value());
}

// docs/formats/group-state.md "Committed offsets": the worked example's bytes.
TEST(GroupStateKeys, CommittedOffsetKeyAndValueMatchTheDocumentedBytes) {
  const std::string key = CommittedOffsetKey("g", "t", 0);
  EXPECT_EQ(key, "group/g/o/t/0");
  const std::string v = EncodeOffsetValue(key, 42);
  EXPECT_EQ(v, std::string("\x01\x2a\0\0\0\0\0\0\0\x5b\x2b\xc8\x27", 13));
  EXPECT_EQ(*DecodeOffsetValue(key, v), 42);
  ExpectEveryFlipAndCutRefused(DecodeOffsetValue, key, v);
  // The value under another queue's key is detected (the crc covers the key).
  EXPECT_EQ(DecodeOffsetValue(CommittedOffsetKey("g", "t", 1), v).status().code(),
            absl::StatusCode::kDataLoss);

  auto pk = ParseKey(CommittedOffsetKey("grp", "orders", 3));
  ASSERT_TRUE(pk.has_value());
  EXPECT_EQ(pk->kind, ParsedKey::kCommittedOffset);
  EXPECT_EQ(pk->queue.group, "grp");
  EXPECT_EQ(pk->queue.topic, "orders");
  EXPECT_EQ(pk->queue.queue_id, 3);
  EXPECT_FALSE(ParseKey("group/grp/o/orders/03").has_value());
  EXPECT_FALSE(ParseKey("group/grp/o/orders/-1").has_value());
  EXPECT_FALSE(ParseKey("group/grp/o/orders").has_value());
}

TEST(GroupStateValues, LeaseRoundTripAndEveryBitFlipIsDetected) {
  LeaseRecord r{7, 3, 1'700'000'030'000, 1'700'000'000'000};
  std::string key = LeaseKey(Q(), 5);
  std::string v = EncodeLeaseValue(key, r);
  ASSERT_EQ(v.size(), 29u);
  auto d = DecodeLeaseValue(key, v);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->epoch, 7u);
  EXPECT_EQ(d->attempt, 3u);
  EXPECT_EQ(d->invisible_until_ms, 1'700'000'030'000);
  EXPECT_EQ(d->received_ms, 1'700'000'000'000);
  ExpectEveryFlipAndCutRefused(DecodeLeaseValue, key, v);
  // A value moved under another key fails its check.
  EXPECT_FALSE(DecodeLeaseValue(LeaseKey(Q(), 6), v).ok());
}

TEST(GroupStateKeys, LeaseBlockKeyParsesAndSortsByFirstOffset) {
  std::string k = LeaseBlockKey(Q(), 64);
  EXPECT_EQ(k, "group/grp/b/orders/%RETRY%grp/3/00000000000000000064");
  auto pk = ParseKey(k);
  ASSERT_TRUE(pk.has_value());
  EXPECT_EQ(pk->kind, ParsedKey::kLeaseBlock);
  EXPECT_EQ(pk->queue, Q());
  EXPECT_EQ(pk->queue_offset, 64);
  EXPECT_LT(LeaseBlockKey(Q(), 9), LeaseBlockKey(Q(), 10));
  EXPECT_FALSE(ParseKey("group/grp/b/orders/r/3/64").has_value());
}

TEST(GroupStateValues, LeaseBlockRoundTripAndCorruptionIsDataLoss) {
  std::string key = LeaseBlockKey(Q(), 5);
  std::vector<BlockLease> in = {{5, LeaseRecord{1, 1, 1'700'000'030'000, 1'700'000'000'000}},
                                {7, LeaseRecord{2, 4, 1'700'000'090'000, 1'700'000'000'000}}};
  std::string v = EncodeLeaseBlockValue(key, in);
  ASSERT_EQ(v.size(), 1u + 4u + 2u * 32u + 4u);
  auto d = DecodeLeaseBlockValue(key, v);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[1].first, 7);
  EXPECT_EQ((*d)[1].second.epoch, 2u);
  EXPECT_EQ((*d)[1].second.attempt, 4u);
  EXPECT_EQ((*d)[1].second.invisible_until_ms, 1'700'000'090'000);
  EXPECT_EQ((*d)[0].second.received_ms, 1'700'000'000'000);
  ExpectEveryFlipAndCutRefused(DecodeLeaseBlockValue, key, v);
  EXPECT_FALSE(DecodeLeaseBlockValue(LeaseBlockKey(Q(), 6), v).ok());
  // Well-sealed but semantically bad: empty, too many, out of order.
  EXPECT_FALSE(DecodeLeaseBlockValue(key, EncodeLeaseBlockValue(key, {})).ok());
  std::vector<BlockLease> many(kMaxBlockLeases + 1);
  for (size_t i = 0; i < many.size(); ++i) many[i].first = static_cast<int64_t>(i);
  EXPECT_FALSE(DecodeLeaseBlockValue(key, EncodeLeaseBlockValue(key, many)).ok());
  std::vector<BlockLease> unordered = {in[1], in[0]};
  EXPECT_FALSE(DecodeLeaseBlockValue(key, EncodeLeaseBlockValue(key, unordered)).ok());
}

TEST(GroupStateValues, FifoLeaseBlockIsVersionTwoAndRoundTrips) {
  std::string key = LeaseBlockKey(Q(), 5);
  LeaseRecord live{1, 1, 1'700'000'030'000, 1'700'000'000'000};
  live.msg_group = "order-17";
  LeaseRecord parked{0, 1, 0, 0};
  parked.parked = true;
  parked.msg_group = "order-17";
  LeaseRecord ungrouped{3, 2, 1'700'000'060'000, 1'700'000'000'000};
  ungrouped.parked = true;
  std::vector<BlockLease> in = {{5, live}, {6, parked}, {9, ungrouped}};
  std::string v = EncodeLeaseBlockValue(key, in);
  ASSERT_EQ(v[0], 2);  // version 2: FIFO fields
  ASSERT_EQ(v.size(), 1u + 4u + 3u * 35u + 2u * 8u + 4u);
  auto d = DecodeLeaseBlockValue(key, v);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 3u);
  EXPECT_FALSE((*d)[0].second.parked);
  EXPECT_EQ((*d)[0].second.msg_group, "order-17");
  EXPECT_TRUE((*d)[1].second.parked);
  EXPECT_EQ((*d)[1].second.epoch, 0u);
  EXPECT_EQ((*d)[1].second.msg_group, "order-17");
  EXPECT_TRUE((*d)[2].second.parked);
  EXPECT_EQ((*d)[2].second.msg_group, "");
  EXPECT_EQ((*d)[2].second.invisible_until_ms, 1'700'000'060'000);
  EXPECT_EQ((*d)[2].second.attempt, 2u);
  ExpectEveryFlipAndCutRefused(DecodeLeaseBlockValue, key, v);
  // A block without FIFO fields stays version 1, byte for byte as before.
  EXPECT_EQ(EncodeLeaseBlockValue(key, {{5, LeaseRecord{1, 1, 10, 0}}})[0], 1);
}

std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

TEST(GroupStateValues, LeaseBlockWorkedExampleOfTheFormatDoc) {
  const QueueKey k{"g", "t", "t", 0};
  const std::string key = LeaseBlockKey(k, 5);
  ASSERT_EQ(key, "group/g/b/t/t/0/00000000000000000005");
  const LeaseRecord l{1, 1, 1'700'000'030'000, 1'700'000'000'000};
  EXPECT_EQ(Hex(EncodeLeaseBlockValue(key, {{5, l}, {6, l}})),
            "0102000000"
            "0500000000000000010000000100000030dde5cf8b0100000068e5cf8b010000"
            "0600000000000000010000000100000030dde5cf8b0100000068e5cf8b010000"
            "0d55bbdd");
  EXPECT_EQ(Hex(EncodeLeaseBlockValue(key, {{6, l}})),
            "0101000000"
            "0600000000000000010000000100000030dde5cf8b0100000068e5cf8b010000"
            "0ed65c9a");
  EXPECT_EQ(Hex(EncodeOffsetValue(ProgressKey(k), 7)), "01070000000000000039096cf6");
}

TEST(GroupStateValues, OffsetAndPolicyRoundTrip) {
  std::string k = ProgressKey(Q());
  EXPECT_EQ(*DecodeOffsetValue(k, EncodeOffsetValue(k, 123456789)), 123456789);
  GroupPolicy p;
  p.max_attempts = 5;
  p.ttl_ms = 86'400'000;
  p.backoff_ms = {1, 2, 3};
  auto d = DecodePolicyValue(PolicyKey("g"), EncodePolicyValue(PolicyKey("g"), p));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->max_attempts, 5);
  EXPECT_EQ(d->ttl_ms, 86'400'000);
  EXPECT_EQ(d->backoff_ms, (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace tokimq::consumer
