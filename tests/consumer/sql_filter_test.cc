// SQL92 property filter (broker/src/consumer/sql_filter.h): parse errors and evaluation
// tables; the expected values follow RocketMQ's filter module (filter/expression/*.java) with
// string property values, as its broker evaluates them.
#include "consumer/sql_filter.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tokimq::consumer {
namespace {

using Truth = SqlFilter::Truth;
using Props = std::map<std::string, std::string>;

Truth Eval(const std::string& expr, const Props& props) {
  absl::StatusOr<SqlFilter> f = SqlFilter::Parse(expr);
  EXPECT_TRUE(f.ok()) << expr << ": " << f.status();
  if (!f.ok()) return Truth::kError;
  return f->Evaluate([&](std::string_view name, std::string_view* value) {
    auto it = props.find(std::string(name));
    if (it == props.end()) return false;
    *value = it->second;
    return true;
  });
}

struct Case {
  const char* expr;
  Props props;
  Truth want;
};

void RunTable(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(Eval(c.expr, c.props), c.want) << c.expr;
  }
}

constexpr Truth T = Truth::kTrue;
constexpr Truth F = Truth::kFalse;
constexpr Truth U = Truth::kUnknown;
constexpr Truth E = Truth::kError;

TEST(SqlFilter, ComparesPropertiesWithNumbers) {
  RunTable({
      {"a = 5", {{"a", "5"}}, T},
      {"a = 5", {{"a", "6"}}, F},
      {"a <> 5", {{"a", "6"}}, T},
      {"a > 3", {{"a", "5"}}, T},
      {"a > 3", {{"a", "3"}}, F},
      {"a >= 3", {{"a", "3"}}, T},
      {"a < 3", {{"a", "-4"}}, T},
      {"a <= -4", {{"a", "-4"}}, T},
      {"a > 3.14", {{"a", "3.15"}}, T},
      {"a > 3.1E10", {{"a", "31000000001"}}, T},
      {"a = 2.5", {{"a", "2.50"}}, T},
      {"a > 1000000000000", {{"a", "1000000000001"}}, T},
      {"a = 5L", {{"a", "5"}}, T},
      {"a = -5", {{"a", "-5"}}, T},
      {"a > - - 5", {{"a", "6"}}, T},
  });
}

TEST(SqlFilter, UnconvertiblePropertyIsAnErrorAndDoesNotMatch) {
  RunTable({
      {"a > 3", {{"a", "abc"}}, E},
      {"a = 3", {{"a", "abc"}}, E},
      {"a <> 3", {{"a", "abc"}}, E},
      // An integer literal converts the property with Long.valueOf: "5.5" is not a long.
      {"a > 3", {{"a", "5.5"}}, E},
      {"a > 3.0", {{"a", "5.5"}}, T},
      // The error ends the whole evaluation, even under OR (RocketMQ throws).
      {"a > 3 OR TRUE", {{"a", "x"}}, E},
      // ... unless OR is decided before the error is reached.
      {"TRUE OR a > 3", {{"a", "x"}}, T},
  });
}

TEST(SqlFilter, ComparesStringsWithEqualityOnly) {
  RunTable({
      {"region = 'eu'", {{"region", "eu"}}, T},
      {"region = 'eu'", {{"region", "EU"}}, F},
      {"region <> 'eu'", {{"region", "us"}}, T},
      {"'it''s' = q", {{"q", "it's"}}, T},
      // Two properties: = compares the strings, > compares them as numbers.
      {"a = b", {{"a", "x"}, {"b", "x"}}, T},
      {"a > b", {{"a", "10"}, {"b", "9"}}, T},
      {"a > b", {{"a", "x"}, {"b", "y"}}, E},
  });
}

TEST(SqlFilter, MissingPropertyIsNull) {
  RunTable({
      {"a = 5", {}, U},
      {"a <> 5", {}, U},
      {"a > 5", {}, U},
      {"a = 'x'", {}, U},
      {"a IS NULL", {}, T},
      {"a IS NULL", {{"a", ""}}, F},
      {"a IS NOT NULL", {{"a", ""}}, T},
      {"a IS NOT NULL", {}, F},
      {"NOT (a = 5)", {}, U},
      {"a IN ('x')", {}, U},
      {"a NOT IN ('x')", {}, U},
      {"a BETWEEN 1 AND 2", {}, U},
  });
}

TEST(SqlFilter, LogicIsThreeValued) {
  RunTable({
      {"a = 1 AND b = 2", {{"a", "1"}, {"b", "2"}}, T},
      {"a = 1 AND b = 2", {{"a", "1"}, {"b", "3"}}, F},
      {"a = 1 AND b = 2", {{"a", "1"}}, U},
      {"a = 1 AND b = 2", {{"a", "0"}}, F},
      {"a = 1 OR b = 2", {{"b", "2"}}, T},
      {"a = 1 OR b = 2", {{"b", "3"}}, U},
      {"a = 1 OR b = 2", {{"a", "0"}, {"b", "3"}}, F},
      {"NOT (a = 1)", {{"a", "2"}}, T},
      {"TRUE", {}, T},
      {"FALSE", {}, F},
      {"NOT FALSE AND TRUE", {}, T},
      {"(a = 1 OR a = 2) AND NOT (b = 3)", {{"a", "2"}, {"b", "4"}}, T},
      {"NULL", {}, U},
      // A property alone as a condition is a string, never TRUE.
      {"flag", {{"flag", "true"}}, F},
      {"flag", {}, U},
      // NOT binds tighter than =: (NOT a) = 1 compares a boolean with a number.
      {"NOT a = 1", {{"a", "1"}}, F},
  });
}

TEST(SqlFilter, BooleanLiteralsConvertTheProperty) {
  RunTable({
      {"flag = TRUE", {{"flag", "true"}}, T},
      {"flag = TRUE", {{"flag", "TRUE"}}, T},
      {"flag = TRUE", {{"flag", "yes"}}, F},
      {"flag = FALSE", {{"flag", "no"}}, T},
      {"TRUE = TRUE", {}, T},
  });
}

TEST(SqlFilter, BetweenAndIn) {
  RunTable({
      {"a BETWEEN 3 AND 10", {{"a", "3"}}, T},
      {"a BETWEEN 3 AND 10", {{"a", "10"}}, T},
      {"a BETWEEN 3 AND 10", {{"a", "11"}}, F},
      {"a NOT BETWEEN 3 AND 10", {{"a", "11"}}, T},
      {"a NOT BETWEEN 3 AND 10", {{"a", "5"}}, F},
      {"a BETWEEN -5 AND 5", {{"a", "-5"}}, T},
      {"a BETWEEN 1.5 AND 2.5", {{"a", "2"}}, T},
      {"a IN ('x', 'y')", {{"a", "y"}}, T},
      {"a IN ('x', 'y')", {{"a", "z"}}, F},
      {"a NOT IN ('4', '4', '5')", {{"a", "3"}}, T},
      {"a NOT IN ('4', '4', '5')", {{"a", "5"}}, F},
      {"a not in ('4', '4', '5') and b between 3 and 10", {{"a", "3"}, {"b", "4"}}, T},
  });
}

TEST(SqlFilter, ContainsStartsWithEndsWith) {
  RunTable({
      {"v CONTAINS 'x'", {{"v", "axb"}}, T},
      {"v STARTSWITH 'ax'", {{"v", "axb"}}, T},
      {"v ENDSWITH 'xb'", {{"v", "axb"}}, T},
      {"v NOT CONTAINS 'x'", {{"v", "axb"}}, F},
      {"v NOT CONTAINS 'u'", {{"v", "axb"}}, T},
      {"v CONTAINS ''", {{"v", "axb"}}, F},
      {"v NOT CONTAINS ''", {{"v", "axb"}}, F},
      {"v NOT CONTAINS 'x'", {}, F},
  });
}

TEST(SqlFilter, KeywordsAreCaseInsensitiveNamesAreNot) {
  RunTable({
      {"a = 1 and B is null", {{"a", "1"}, {"b", "2"}}, T},
      {"a Between 1 aNd 2 Or false", {{"a", "2"}}, T},
      {"$x_1 = 'v'", {{"$x_1", "v"}}, T},
      {"a = 1 -- trailing comment", {{"a", "1"}}, T},
      {"/* c */ a = 1", {{"a", "1"}}, T},
      {"TAGS IN ('a', 'b')", {{"TAGS", "b"}}, T},
  });
}

TEST(SqlFilter, RefusesBadExpressions) {
  const char* bad[] = {
      "",
      "   ",
      "a =",
      "a = 'x",
      "a > 'abc'",                 // strings cannot be ordered (RocketMQ)
      "a > TRUE",
      "a = NULL",                  // use IS NULL
      "TRUE = 'x'",
      "a BETWEEN 10 AND 3",        // bounds reversed
      "a BETWEEN NULL AND 3",
      "a BETWEEN 'a' AND 'b'",
      "a IN (1, 2)",               // IN takes strings
      "a IN ()",
      "'x' IN ('x')",              // IN needs a property
      "a IS 5",
      "5",                         // not a condition
      "'x'",
      "-a",
      "a = 1 b",                   // trailing tokens
      "a == 1",
      "a != 1",
      "(a = 1",
      "a = 1)",
      "a = 01",
      "a = 99999999999999999999",
      "a CONTAINS x",
      "a = 1 /* open",
      "a # 1",
      "a > 1 > 2",
  };
  for (const char* e : bad) {
    absl::StatusOr<SqlFilter> f = SqlFilter::Parse(e);
    EXPECT_FALSE(f.ok()) << "accepted: " << e;
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << e;
      EXPECT_NE(f.status().message().find("sql filter: "), std::string::npos) << e;
    }
  }
}

TEST(SqlFilter, ErrorNamesThePosition) {
  absl::StatusOr<SqlFilter> f = SqlFilter::Parse("a = 1 AND b > 'x'");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(),
            "sql filter: only numbers can be compared with >, >=, <, <= or BETWEEN at byte 12");
}

TEST(SqlFilter, BoundsDepthNodesAndLength) {
  // The innermost operand is a level of its own.
  std::string deep(kMaxSqlFilterDepth - 1, '(');
  deep += "a = 1" + std::string(kMaxSqlFilterDepth - 1, ')');
  EXPECT_TRUE(SqlFilter::Parse(deep).ok());
  std::string deeper = "(" + deep + ")";
  EXPECT_FALSE(SqlFilter::Parse(deeper).ok());

  std::string nots;
  for (int i = 0; i < kMaxSqlFilterDepth + 1; ++i) nots += "NOT ";
  EXPECT_FALSE(SqlFilter::Parse(nots + "TRUE").ok());

  std::string wide = "a = 1";
  while (wide.size() < kMaxSqlFilterBytes - 16) wide += " OR a = 1";
  absl::StatusOr<SqlFilter> many = SqlFilter::Parse(wide);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("nodes"), std::string::npos);

  EXPECT_FALSE(SqlFilter::Parse(std::string(kMaxSqlFilterBytes + 1, ' ') + "TRUE").ok());
}

}  // namespace
}  // namespace tokimq::consumer
