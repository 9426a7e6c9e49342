// SqlLexer: the tokens of a SQL92 filter expression (the RocketMQ subset in sql_filter.h):
// identifiers and keywords (case-insensitive), string literals ('' escapes a quote), long and
// double literals (a Java `L` suffix allowed), operators, and -- / /* */ comments skipped.
// Used by SqlFilter::Parse (sql_filter.cc), one per parse. Value type: copy it to look ahead.
// Errors: the first lexical error is kept as "<what> at byte <pos>" and ends the tokens (kEnd).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokimq::consumer {

enum class SqlTok {
  kEnd, kId, kString, kLong, kDouble, kLParen, kRParen, kComma, kEq, kNe, kLt, kLe, kGt, kGe,
  kPlus, kMinus, kNot, kAnd, kOr, kBetween, kIn, kTrue, kFalse, kNull, kIs, kContains,
  kStartsWith, kEndsWith
};

struct SqlToken {
  SqlTok kind = SqlTok::kEnd;
  size_t pos = 0;
  std::string text;  // identifier name, decoded string literal
  int64_t l = 0;
  double d = 0;
};

class SqlLexer {
 public:
  explicit SqlLexer(std::string_view in) : in_(in) {}

  // Moves to the next token: token() is kEnd at the end of the text and after an error.
  void Next();
  // The current token; the parser may move its text out.
  SqlToken& token() { return tok_; }
  const SqlToken& token() const { return tok_; }
  // The first error (lexical, or one the parser reported through Fail); empty when none.
  const std::string& error() const { return error_; }
  // Records "<what> at byte <pos>" unless an error was recorded before.
  void Fail(std::string_view what, size_t pos);

 private:
  void SkipSpaceAndComments();
  void LexNumber();
  void LexString();

  std::string_view in_;
  size_t at_ = 0;
  SqlToken tok_;
  std::string error_;
};

}  // namespace tokimq::consumer
