// ACL matching (broker/auth/acl.h): exact / prefix / any levels, deny precedence at a level,
// no match = deny, and the resource / action grammar.
#include "broker/auth/acl.h"

#include <gtest/gtest.h>

namespace tokimq::broker::auth {
namespace {

AclRule Rule(const std::string& resource, ActionSet actions, Decision d = Decision::kAllow) {
  auto p = ParseResourcePattern(resource);
  EXPECT_TRUE(p.ok()) << resource << ": " << p.status();
  return AclRule{*p, actions, d};
}

TEST(AclTest, NoRuleMeansDeny) {
  EXPECT_FALSE(RulesAllow({}, Resource::Topic("orders"), kPub));
  EXPECT_FALSE(RulesAllow({Rule("topic:other", kPub)}, Resource::Topic("orders"), kPub));
  // A rule on the topic for another action does not match.
  EXPECT_FALSE(RulesAllow({Rule("topic:orders", kSub)}, Resource::Topic("orders"), kPub));
  // A topic rule says nothing about a group of the same name.
  EXPECT_FALSE(RulesAllow({Rule("topic:orders", kSub)}, Resource::Group("orders"), kSub));
}

TEST(AclTest, ExactPrefixAndAnyEachAllow) {
  EXPECT_TRUE(RulesAllow({Rule("topic:orders", kPub)}, Resource::Topic("orders"), kPub));
  EXPECT_TRUE(RulesAllow({Rule("topic:ord*", kPub)}, Resource::Topic("orders"), kPub));
  EXPECT_TRUE(RulesAllow({Rule("*", kPub)}, Resource::Topic("orders"), kPub));
  EXPECT_TRUE(RulesAllow({Rule("group:billing-*", kSub)}, Resource::Group("billing-eu"), kSub));
  // The exact rule matches only the exact name; a prefix rule not a shorter name.
  EXPECT_FALSE(RulesAllow({Rule("topic:orders", kPub)}, Resource::Topic("orders2"), kPub));
  EXPECT_FALSE(RulesAllow({Rule("topic:orders*", kPub)}, Resource::Topic("order"), kPub));
}

TEST(AclTest, ExactBeatsPrefixBeatsAny) {
  const std::vector<AclRule> rules = {Rule("*", kPub, Decision::kDeny),
                                      Rule("topic:ord*", kPub, Decision::kAllow),
                                      Rule("topic:orders", kPub, Decision::kDeny)};
  EXPECT_FALSE(RulesAllow(rules, Resource::Topic("orders"), kPub));  // exact deny
  EXPECT_TRUE(RulesAllow(rules, Resource::Topic("ordinal"), kPub));  // prefix allow over any deny
  EXPECT_FALSE(RulesAllow(rules, Resource::Topic("users"), kPub));   // only "*" matches: deny
}

TEST(AclTest, LongerPrefixBeatsShorter) {
  const std::vector<AclRule> rules = {Rule("topic:a*", kSub, Decision::kAllow),
                                      Rule("topic:ab*", kSub, Decision::kDeny)};
  EXPECT_FALSE(RulesAllow(rules, Resource::Topic("abc"), kSub));
  EXPECT_TRUE(RulesAllow(rules, Resource::Topic("acc"), kSub));
}

TEST(AclTest, DenyWinsAtTheSameLevel) {
  // A user holds one rule per pattern, but "*" and "topic:x*" style ties arise across
  // patterns of equal length (and in RulesAllow's input, duplicates are allowed).
  const std::vector<AclRule> tie = {Rule("topic:ab*", kPub, Decision::kAllow),
                                    Rule("group:ab*", kPub, Decision::kDeny),
                                    Rule("topic:ab*", kPub, Decision::kDeny)};
  EXPECT_FALSE(RulesAllow(tie, Resource::Topic("abc"), kPub));
  const std::vector<AclRule> any_tie = {Rule("*", kSub, Decision::kAllow),
                                        Rule("*", kSub, Decision::kDeny)};
  EXPECT_FALSE(RulesAllow(any_tie, Resource::Group("g"), kSub));
}

TEST(AclTest, ALessSpecificRuleForTheActionStillApplies) {
  // The exact rule does not cover sub, so it does not hide the "*" allow for sub.
  const std::vector<AclRule> rules = {Rule("topic:orders", kPub, Decision::kAllow),
                                      Rule("*", kSub, Decision::kAllow)};
  EXPECT_TRUE(RulesAllow(rules, Resource::Topic("orders"), kSub));
}

TEST(AclTest, ClusterResourceMatchesOnlyAny) {
  EXPECT_FALSE(RulesAllow({Rule("topic:*", kAdmin)}, Resource::Cluster(), kAdmin));
  EXPECT_TRUE(RulesAllow({Rule("*", kAdmin)}, Resource::Cluster(), kAdmin));
}

TEST(AclTest, ResourceGrammar) {
  auto p = ParseResourcePattern("topic:orders*");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->prefix);
  EXPECT_EQ(p->name, "orders");
  EXPECT_EQ(p->ToString(), "topic:orders*");
  EXPECT_EQ(ParseResourcePattern("group:g1")->ToString(), "group:g1");
  EXPECT_TRUE(ParseResourcePattern("*")->any);
  EXPECT_TRUE(ParseResourcePattern("topic:*").ok());  // every topic (not the cluster)
  for (const char* bad :
       {"", "orders", "queue:x", "topic:", "topic:a*b", "topic:a b", "group:**"}) {
    EXPECT_EQ(ParseResourcePattern(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(AclTest, ActionGrammar) {
  EXPECT_EQ(*ParseActions("pub"), kPub);
  EXPECT_EQ(*ParseActions("sub,pub"), kPub | kSub);
  EXPECT_EQ(*ParseActions("pub,sub,admin"), kAllActions);
  EXPECT_EQ(ActionsToString(kAdmin | kPub), "pub,admin");
  for (const char* bad : {"", "read", "pub,", ",pub", "pub;sub"}) {
    EXPECT_FALSE(ParseActions(bad).ok()) << bad;
  }
}

TEST(AclTest, KeyRules) {
  EXPECT_TRUE(ValidateAccessKey("alice").ok());
  EXPECT_FALSE(ValidateAccessKey("ab").ok());
  EXPECT_FALSE(ValidateAccessKey("a,b=c").ok());
  EXPECT_FALSE(ValidateAccessKey(std::string(65, 'a')).ok());
  EXPECT_TRUE(ValidateSecretKey("s3cr3t!").ok());
  EXPECT_FALSE(ValidateSecretKey("short").ok());
  EXPECT_FALSE(ValidateSecretKey("with space").ok());
}

}  // namespace
}  // namespace tokimq::broker::auth
