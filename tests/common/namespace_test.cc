// Namespaces (common/namespace.h): the namespace rule, wrapping and unwrapping of resource
// names, and the name rule (common/names.h) on wrapped names.
#include "common/namespace.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/names.h"

namespace tokimq {
namespace {

TEST(NamespaceTest, NamespacesAreOneTo64CharactersOfLettersDigitsUnderscoreAndDash) {
  EXPECT_TRUE(IsValidNamespace("MQ_INST_1234567890_BXfWdOD8"));
  EXPECT_TRUE(IsValidNamespace("team-a"));
  EXPECT_TRUE(IsValidNamespace(std::string(64, 'n')));
  EXPECT_FALSE(IsValidNamespace(std::string(65, 'n')));
  for (const std::string& bad :
       std::vector<std::string>{"", "a%b", "a.b", "a|b", "a b", "a/b", "caf\xc3\xa9", ".", ".."}) {
    EXPECT_FALSE(IsValidNamespace(bad)) << bad;
  }
}

TEST(NamespaceTest, ValidateNamespaceNamesTheNamespaceAndTheRule) {
  EXPECT_TRUE(ValidateNamespace("prod").ok());
  absl::Status s = ValidateNamespace("a%b");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(s.message(),
            "invalid namespace 'a%b': a namespace is 1..64 characters of [A-Za-z0-9_-]");
}

TEST(NamespaceTest, WrapFollowsRocketMqNamespaceUtil) {
  EXPECT_EQ(WrapName("prod", "orders"), "prod%orders");
  EXPECT_EQ(WrapName("prod", "%RETRY%billing"), "%RETRY%prod%billing");
  EXPECT_EQ(WrapName("prod", "%DLQ%billing"), "%DLQ%prod%billing");
  // No namespace, no name, the broker's own topics, and names already wrapped: unchanged.
  EXPECT_EQ(WrapName("", "orders"), "orders");
  EXPECT_EQ(WrapName("prod", ""), "");
  EXPECT_EQ(WrapName("prod", "tokimq_sys_poison"), "tokimq_sys_poison");
  EXPECT_EQ(WrapName("prod", "prod%orders"), "prod%orders");
  EXPECT_EQ(WrapName("prod", "%DLQ%prod%billing"), "%DLQ%prod%billing");
  // Another namespace's name is wrapped again, which the name rule then refuses.
  EXPECT_EQ(WrapName("prod", "test%orders"), "prod%test%orders");
  EXPECT_FALSE(IsValidTopicName(WrapName("prod", "test%orders")));
  // A namespace that is a prefix of the name's own namespace is not "already wrapped".
  EXPECT_EQ(WrapName("pro", "prod%orders"), "pro%prod%orders");
}

TEST(NamespaceTest, UnwrapGivesNamespaceAndNameBack) {
  EXPECT_EQ(NamespaceOf("prod%orders"), "prod");
  EXPECT_EQ(NamespaceOf("%RETRY%prod%billing"), "prod");
  EXPECT_EQ(NamespaceOf("%DLQ%prod%billing"), "prod");
  EXPECT_EQ(NamespaceOf("orders"), "");
  EXPECT_EQ(NamespaceOf("%DLQ%billing"), "");
  EXPECT_EQ(WithoutNamespace("prod%orders"), "orders");
  EXPECT_EQ(WithoutNamespace("%RETRY%prod%billing"), "%RETRY%billing");
  EXPECT_EQ(WithoutNamespace("%DLQ%prod%billing"), "%DLQ%billing");
  EXPECT_EQ(WithoutNamespace("orders"), "orders");
  EXPECT_EQ(UnwrapFor("prod", "prod%orders"), "orders");
  EXPECT_EQ(UnwrapFor("prod", "%DLQ%prod%billing"), "%DLQ%billing");
  EXPECT_EQ(UnwrapFor("prod", "test%orders"), "test%orders");
  EXPECT_EQ(UnwrapFor("", "prod%orders"), "prod%orders");
  for (const std::string& name : std::vector<std::string>{"orders", "%RETRY%g", "%DLQ%g"}) {
    EXPECT_EQ(UnwrapFor("ns", WrapName("ns", name)), name);
  }
}

TEST(NamespaceTest, WrappedNamesCountTheirNamespaceAgainstTheNameLimits) {
  EXPECT_TRUE(IsValidTopicName("prod%orders"));
  EXPECT_TRUE(IsValidGroupName("prod%billing"));
  EXPECT_TRUE(IsValidDestination("%DLQ%prod%billing"));
  EXPECT_TRUE(IsValidDestination("%RETRY%prod%billing"));
  const std::string ns(64, 'n');
  EXPECT_TRUE(IsValidTopicName(ns + "%" + std::string(62, 't')));   // 127 bytes
  EXPECT_FALSE(IsValidTopicName(ns + "%" + std::string(63, 't')));  // 128
  EXPECT_TRUE(IsValidGroupName(ns + "%" + std::string(183, 'g')));  // 248
  EXPECT_FALSE(IsValidGroupName(ns + "%" + std::string(184, 'g')));
  EXPECT_FALSE(IsValidTopicName(std::string(65, 'n') + "%t"));  // namespace too long
  EXPECT_FALSE(IsValidTopicName("a.b%orders"));                 // '.' not in a namespace
  EXPECT_FALSE(IsValidTopicName("prod%."));
  EXPECT_FALSE(IsValidTopicName("prod%"));
  EXPECT_EQ(ValidateTopicName("a.b%orders").message(),
            "invalid topic name 'a.b%orders': " + std::string(kTopicNameRule) +
                " (a name \"<namespace>%<name>\" counts its namespace; " + kNamespaceRule + ")");
}

}  // namespace
}  // namespace tokimq
