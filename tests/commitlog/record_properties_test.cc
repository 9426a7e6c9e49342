// The properties section as bytes: Message::encoded_properties in the encoder, and the
// record::FindProperty / DecodeProperties / EditProperties helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "commitlog/record.h"
#include "common/coding.h"

namespace tokimq {
namespace {

using Props = std::map<std::string, std::string>;
using Pairs = std::vector<std::pair<std::string, std::string>>;

// The section bytes of `pairs` in the order given (duplicates and any order allowed).
std::string Section(const Pairs& pairs) {
  std::string out;
  for (const auto& [k, v] : pairs) {
    PutFixed32(&out, static_cast<uint32_t>(k.size()));
    out += k;
    PutFixed32(&out, static_cast<uint32_t>(v.size()));
    out += v;
  }
  return out;
}

std::string Section(const Props& props) { return Section(Pairs(props.begin(), props.end())); }

Message Base() {
  Message m;
  m.topic = "orders";
  m.queue_id = 2;
  m.queue_offset = QueueOffset(9);
  m.physical_offset = PhysicalOffset(4096);
  m.born_ms = 1'700'000'000'000;
  m.store_ms = 1'700'000'000'005;
  m.flags = 1;
  m.body = std::string("b\0dy", 4);
  return m;
}

std::string Encoded(const Message& m) {
  std::string rec;
  record::Encode(m, &rec);
  return rec;
}

// What EditProperties promises: the map path's result.
std::string EditByMap(const std::string& section, const std::vector<record::PropertyEdit>& edits) {
  Props p;
  EXPECT_TRUE(record::DecodeProperties(section, &p));
  for (const auto& e : edits) {
    if (e.value) {
      p.insert_or_assign(std::string(e.key), std::string(*e.value));
    } else {
      p.erase(std::string(e.key));
    }
  }
  return Section(p);
}

class RecordPropertiesTest : public ::testing::Test {};

TEST_F(RecordPropertiesTest, EncodedPropertiesGiveTheRecordThePropertiesMapGives) {
  const std::vector<Props> cases = {
      {},
      {{"TAGS", "a"}},
      {{"", ""}, {"A", ""}, {"TAGS", std::string("\0\xff\x80", 3)}},
      {{std::string("\xff\xfe", 2), "high bytes sort last"}, {"KEYS", "k1 k2"}, {"a", "b"}},
  };
  for (const Props& props : cases) {
    Message by_map = Base();
    by_map.properties = props;
    Message by_bytes = Base();
    by_bytes.encoded_properties = Section(props);
    EXPECT_EQ(by_bytes.EncodedSize(), by_map.EncodedSize());
    EXPECT_EQ(Encoded(by_bytes), Encoded(by_map));
    std::string rec(by_bytes.EncodedSize(), '\0');
    record::EncodeTo(by_bytes, rec.size(), rec.data());  // the CommitLog's entry point
    EXPECT_EQ(rec, Encoded(by_map));
  }
}

TEST_F(RecordPropertiesTest, DecodersFillTheMapAndNeverSetEncodedProperties) {
  Message in = Base();
  in.encoded_properties = Section(Props{{"TAGS", "a"}, {"UNIQ_KEY", "id"}});
  const std::string rec = Encoded(in);
  Message out;
  out.encoded_properties = "left over from an earlier use";
  ASSERT_TRUE(record::Decode(rec, &out).ok());
  EXPECT_TRUE(out.encoded_properties.empty());
  EXPECT_EQ(out.properties, (Props{{"TAGS", "a"}, {"UNIQ_KEY", "id"}}));
  EXPECT_EQ(Encoded(out), rec);
}

TEST_F(RecordPropertiesTest, FindPropertyReturnsTheFirstOfDuplicates) {
  const std::string s = Section(Pairs{{"A", "1"}, {"TAGS", "first"}, {"TAGS", "second"}});
  std::string_view v;
  ASSERT_TRUE(record::FindProperty(s, "TAGS", &v));
  EXPECT_EQ(v, "first");
  EXPECT_FALSE(record::FindProperty(s, "TAG", &v));
  EXPECT_FALSE(record::FindProperty("", "TAGS", &v));
  EXPECT_FALSE(record::FindProperty(s.substr(0, s.size() - 1), "X", &v));  // truncated
}

TEST_F(RecordPropertiesTest, DecodePropertiesKeepsTheFirstOfDuplicatesAndRejectsTruncation) {
  Props p{{"stale", "x"}};
  const std::string s = Section(Pairs{{"B", "1"}, {"A", "2"}, {"B", "3"}});
  ASSERT_TRUE(record::DecodeProperties(s, &p));
  EXPECT_EQ(p, (Props{{"A", "2"}, {"B", "1"}}));
  const std::string one = Section(Pairs{{"KEY", "value"}});
  for (size_t cut = 1; cut < one.size(); ++cut) {
    Props q;
    EXPECT_FALSE(record::DecodeProperties(one.substr(0, cut), &q)) << "cut at " << cut;
  }
}

TEST_F(RecordPropertiesTest, EditPropertiesDropsSetsAndPlacesInKeyOrder) {
  const std::string s =
      Section(Pairs{{"A", "a"}, {"M", "m"}, {"M", "dup"}, {"Q", "q"}, {"Z", "z"}});
  const std::vector<record::PropertyEdit> edits = {{"0", "before all"}, {"M", std::nullopt},
                                                   {"N", "between"},    {"Q", "new q"},
                                                   {"Y", std::nullopt}, {"zz", "after all"}};
  std::string out = "garbage";
  ASSERT_TRUE(record::EditProperties(s, edits, &out));
  EXPECT_EQ(out, Section(Pairs{{"0", "before all"},
                               {"A", "a"},
                               {"N", "between"},
                               {"Q", "new q"},
                               {"Z", "z"},
                               {"zz", "after all"}}));
  EXPECT_EQ(out, EditByMap(s, edits));
}

TEST_F(RecordPropertiesTest, EditPropertiesOfAnEmptySectionWritesTheSetEdits) {
  std::string out;
  ASSERT_TRUE(record::EditProperties("", {}, &out));
  EXPECT_EQ(out, "");
  const std::vector<record::PropertyEdit> edits = {{"A", std::nullopt}, {"B", ""}};
  ASSERT_TRUE(record::EditProperties("", edits, &out));
  EXPECT_EQ(out, Section(Pairs{{"B", ""}}));
}

TEST_F(RecordPropertiesTest, EditPropertiesRefusesWhatItCannotMergeInOnePass) {
  std::string out;
  const std::vector<record::PropertyEdit> none;
  EXPECT_FALSE(record::EditProperties(Section(Pairs{{"B", "1"}, {"A", "2"}}), none, &out));
  const std::vector<record::PropertyEdit> unsorted = {{"B", "1"}, {"A", "2"}};
  EXPECT_FALSE(record::EditProperties("", unsorted, &out));
  const std::vector<record::PropertyEdit> repeated = {{"A", "1"}, {"A", "2"}};
  EXPECT_FALSE(record::EditProperties("", repeated, &out));
  const std::string s = Section(Pairs{{"A", "1"}});
  for (size_t cut = 1; cut < s.size(); ++cut) {
    EXPECT_FALSE(record::EditProperties(s.substr(0, cut), none, &out)) << "cut at " << cut;
  }
}

// Random sections (sorted, with duplicates, empty and binary keys and values) and random edits:
// every result is the map path's.
TEST_F(RecordPropertiesTest, EditPropertiesMatchesTheMapPathOnRandomInput) {
  std::mt19937 rng(20261130);
  const std::vector<std::string> keys = {"",
                                         "A",
                                         "AB",
                                         "B",
                                         "M",
                                         "TAGS",
                                         "TIMER_",
                                         "Z",
                                         "a",
                                         std::string("\x80", 1),
                                         std::string("\0", 1),
                                         std::string("\xff\xff", 2)};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto value = [&] {
    std::string v(pick(5), '\0');
    for (char& c : v) c = static_cast<char>(rng());
    return v;
  };
  for (int iter = 0; iter < 2000; ++iter) {
    Pairs pairs;
    const size_t n = pick(10);
    for (size_t i = 0; i < n; ++i) pairs.emplace_back(keys[pick(keys.size())], value());
    std::stable_sort(pairs.begin(), pairs.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> edit_keys;
    for (const auto& k : keys) {
      if (pick(3) == 0) edit_keys.push_back(k);
    }
    std::sort(edit_keys.begin(), edit_keys.end());
    std::vector<std::string> values;
    values.reserve(edit_keys.size());
    std::vector<record::PropertyEdit> edits;
    for (const auto& k : edit_keys) {
      values.push_back(value());
      if (pick(3) == 0) {
        edits.push_back({k, std::nullopt});
      } else {
        edits.push_back({k, values.back()});
      }
    }
    const std::string s = Section(pairs);
    std::string out;
    ASSERT_TRUE(record::EditProperties(s, edits, &out)) << "iteration " << iter;
    ASSERT_EQ(out, EditByMap(s, edits)) << "iteration " << iter;
  }
}

}  // namespace
}  // namespace tokimq
