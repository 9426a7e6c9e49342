// SqlFilter: a parsed SQL92 property filter (RocketMQ's "SQL92" message selector subset) and
// its evaluation against a message's properties at receive time.
//
// Grammar (RocketMQ's filter/SelectorParser.jj, precedence from loosest to tightest):
//   selector   := or EOF
//   or         := and { OR and }
//   and        := equality { AND equality }
//   equality   := comparison { ('=' | '<>') comparison | IS [NOT] NULL }
//   comparison := unary { ('>' | '>=' | '<' | '<=') unary
//                       | [NOT] BETWEEN unary AND unary
//                       | [NOT] IN '(' 'str' { ',' 'str' } ')' }
//   unary      := '+' unary | '-' unary | NOT unary | primary
//   primary    := literal | identifier | '(' or ')'
//   literal    := 'string' ('' escapes a quote) | integer [L] | decimal/exponent | TRUE |
//                 FALSE | NULL
// Keywords are case-insensitive; identifiers ([A-Za-z_$][A-Za-z0-9_$]*) name properties and
// are case-sensitive. `--` line and `/* */` block comments are skipped. As in RocketMQ, NOT
// binds tighter than a comparison: write `NOT (a = 1)`, not `NOT a = 1`.
//
// Evaluation follows RocketMQ's rules (filter/expression/*.java, with the string conversion
// its parser always turns on): every property value is a string; a missing property is NULL;
// comparing NULL gives UNKNOWN, AND/OR/NOT are three-valued, and a message matches only when
// the whole expression is TRUE. Comparing a property with a number converts the property
// (`a = 5` and `a > 3` hold for a = "5"); a property that does not convert ("abc" > 3) is an
// evaluation error, and an error means no match. `>`, `>=`, `<`, `<=` and BETWEEN take numbers
// only (a string or boolean literal there is refused at parse time; two properties are compared
// as numbers or not at all). `=`/`<>` compare strings with strings. IN takes string literals.
// A property used as a condition on its own (`a AND b`) is never TRUE (its value is a string).
//
// Bounds (tokimq's, RocketMQ has none): kMaxSqlFilterBytes of text, kMaxSqlFilterDepth levels
// of nesting (each parenthesis or unary operator is a level, the innermost operand one more),
// kMaxSqlFilterNodes expression nodes; beyond them the expression is refused. Evaluation
// recursion is bounded by the node count.
//
// Deviations from RocketMQ (documented in docs/rocketmq-compat.md): trailing tokens after a
// complete expression are refused (RocketMQ ignores them); an integer literal beyond int64 is
// refused; CONTAINS / STARTSWITH / ENDSWITH are supported as in RocketMQ 5.
//
// Immutable after Parse: Evaluate/Matches are const and may run on any number of threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace tokimq::consumer {

inline constexpr size_t kMaxSqlFilterBytes = 8192;
inline constexpr int kMaxSqlFilterDepth = 32;
inline constexpr int kMaxSqlFilterNodes = 512;

// ASCII case-insensitive equality (keywords, Java's Boolean.valueOf).
bool EqualsIgnoreAsciiCase(std::string_view a, std::string_view b);

class SqlFilter {
 public:
  // Three-valued SQL truth plus the evaluation error RocketMQ raises (an unconvertible value).
  enum class Truth { kFalse, kTrue, kUnknown, kError };

  // The message's property `name`; false when the message has none.
  using Lookup = absl::FunctionRef<bool(std::string_view name, std::string_view* value)>;

  // Errors: kInvalidArgument "sql filter: <reason> at byte <n>" for a syntax error, a refused
  // operand (see above), an empty expression or one over the bounds.
  static absl::StatusOr<SqlFilter> Parse(std::string_view expression);

  Truth Evaluate(Lookup props) const;
  bool Matches(Lookup props) const { return Evaluate(props) == Truth::kTrue; }

  // Value of an expression node: NULL, boolean, int64 (Java Long), double, string.
  struct Value {
    enum Kind { kNull, kBool, kLong, kDouble, kString, kError } kind = kNull;
    bool b = false;
    int64_t l = 0;
    double d = 0;
    std::string_view s;  // into a node's literal or a property value
  };

  enum class Op {
    kConst, kProperty, kNegate, kNot, kBoolCast, kAnd, kOr, kEq, kIsNull,
    kGt, kGe, kLt, kLe, kIn, kContains, kStartsWith, kEndsWith
  };
  struct Node {
    Op op = Op::kConst;
    int left = -1;   // operand indexes into nodes_
    int right = -1;
    bool negated = false;         // kIn: NOT IN; kContains..kEndsWith: NOT form
    Value constant;               // kConst (s points into text)
    std::string text;             // kConst string, kProperty name, kContains.. search string
    std::vector<std::string> in;  // kIn list
  };

 private:
  friend class SqlParser;
  Value Eval(int node, Lookup props) const;
  Value EvalComparison(const Node& n, Lookup props) const;

  std::vector<Node> nodes_;
  int root_ = -1;
};

}  // namespace tokimq::consumer
