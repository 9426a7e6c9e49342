#include "client/ordering/properties.h"

#include <gtest/gtest.h>

namespace tokimq::ordering {
namespace {

using O = EventAtomicOrdering;

TEST(OrderingPropertiesTest, RoundTripsEveryOrdering) {
  for (O o : {O::Relaxed, O::Acquire, O::Release, O::AcqRel}) {
    Properties props = {{"OTHER", "x"}};
    EncodeOrderingProperties(PlanRecord{UINT64_MAX, EventTypeTag{65535}, o}, &props);
    auto decoded = DecodeOrderingProperties(props);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->key, UINT64_MAX);
    EXPECT_EQ(decoded->tag, EventTypeTag{65535});
    EXPECT_EQ(decoded->ordering, o);
    EXPECT_EQ(props.at("OTHER"), "x");
  }
}

TEST(OrderingPropertiesTest, EncodesReadableValues) {
  Properties props;
  EncodeOrderingProperties(PlanRecord{42, EventTypeTag{4}, O::Release}, &props);
  EXPECT_EQ(props, (Properties{{"ORD_KEY", "42"}, {"ORD_TAG", "4"}, {"ORD_MODE", "RELEASE"}}));
  EncodeOrderingProperties(PlanRecord{0, EventTypeTag{0}, O::AcqRel}, &props);
  EXPECT_EQ(props, (Properties{{"ORD_KEY", "0"}, {"ORD_TAG", "0"}, {"ORD_MODE", "ACQ_REL"}}));
}

TEST(OrderingPropertiesTest, NoOrderingPropertiesIsNotFound) {
  EXPECT_FALSE(HasOrderingProperties({{"KEYS", "a"}}));
  EXPECT_TRUE(absl::IsNotFound(DecodeOrderingProperties({{"KEYS", "a"}}).status()));
}

TEST(OrderingPropertiesTest, MissingOnePropertyNamesIt) {
  auto s = DecodeOrderingProperties({{"ORD_KEY", "1"}, {"ORD_MODE", "RELAXED"}}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("ORD_TAG"), std::string::npos) << s;
}

TEST(OrderingPropertiesTest, RejectsMalformedValues) {
  const Properties good = {{"ORD_KEY", "1"}, {"ORD_TAG", "2"}, {"ORD_MODE", "RELAXED"}};
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"ORD_KEY", ""},
      {"ORD_KEY", "-1"},
      {"ORD_KEY", "+1"},
      {"ORD_KEY", " 1"},
      {"ORD_KEY", "1 "},
      {"ORD_KEY", "0x10"},
      {"ORD_KEY", "18446744073709551616"},
      {"ORD_TAG", "65536"},
      {"ORD_TAG", "abc"},
      {"ORD_MODE", "relaxed"},
      {"ORD_MODE", "SEQ_CST"},
      {"ORD_MODE", ""},
  };
  for (const auto& [name, value] : bad) {
    Properties props = good;
    props[name] = value;
    auto s = DecodeOrderingProperties(props).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << name << "=" << value << ": " << s;
    EXPECT_NE(s.message().find(name), std::string::npos) << s;
  }
  EXPECT_TRUE(DecodeOrderingProperties(good).ok());
}

TEST(OrderingPropertiesTest, KeyHashIsStableFnv1a) {
  EXPECT_EQ(HashOrderingKey(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(HashOrderingKey("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_NE(HashOrderingKey("account-42"), HashOrderingKey("account-7"));
}

TEST(OrderingPropertiesTest, ParseOrderingNamesTheProperty) {
  auto s = ParseOrdering("NOPE").status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("ORD_MODE"), std::string::npos);
  EXPECT_NE(s.message().find("NOPE"), std::string::npos);
}

}  // namespace
}  // namespace tokimq::ordering
