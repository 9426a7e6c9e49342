// SqlLexer (sql_lexer.h): the tokens of a SQL92 filter expression.
#include "consumer/sql_lexer.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "consumer/sql_filter.h"
#include "fmt/format.h"

namespace tokimq::consumer {
namespace {

SqlTok Keyword(std::string_view word) {
  static constexpr std::pair<std::string_view, SqlTok> kWords[] = {
      {"NOT", SqlTok::kNot},           {"AND", SqlTok::kAnd},         {"OR", SqlTok::kOr},
      {"BETWEEN", SqlTok::kBetween},   {"IN", SqlTok::kIn},           {"TRUE", SqlTok::kTrue},
      {"FALSE", SqlTok::kFalse},       {"NULL", SqlTok::kNull},       {"IS", SqlTok::kIs},
      {"CONTAINS", SqlTok::kContains}, {"STARTSWITH", SqlTok::kStartsWith},
      {"ENDSWITH", SqlTok::kEndsWith}};
  for (const auto& [w, t] : kWords) {
    if (EqualsIgnoreAsciiCase(w, word)) return t;
  }
  return SqlTok::kId;
}

bool IdStart(char c) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}
bool IdChar(char c) { return IdStart(c) || absl::ascii_isdigit(static_cast<unsigned char>(c)); }
bool Digit(char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }

}  // namespace

void SqlLexer::Fail(std::string_view what, size_t pos) {
  if (error_.empty()) error_ = fmt::format("{} at byte {}", what, pos);
}

void SqlLexer::SkipSpaceAndComments() {
  for (;;) {
    while (at_ < in_.size() &&
           std::string_view(" \t\n\r\f").find(in_[at_]) != std::string_view::npos) {
      ++at_;
    }
    if (in_.substr(at_, 2) == "--") {
      while (at_ < in_.size() && in_[at_] != '\n' && in_[at_] != '\r') ++at_;
    } else if (in_.substr(at_, 2) == "/*") {
      size_t end = in_.find("*/", at_ + 2);
      if (end == std::string_view::npos) {
        Fail("unterminated comment", at_);
        at_ = in_.size();
        return;
      }
      at_ = end + 2;
    } else {
      return;
    }
  }
}

void SqlLexer::LexNumber() {
  size_t start = at_;
  while (at_ < in_.size() && Digit(in_[at_])) ++at_;
  bool is_double = false;
  if (at_ < in_.size() && in_[at_] == '.') {
    is_double = true;
    ++at_;
    while (at_ < in_.size() && Digit(in_[at_])) ++at_;
  }
  if (at_ < in_.size() && (in_[at_] == 'e' || in_[at_] == 'E')) {
    size_t e = at_ + 1;
    if (e < in_.size() && (in_[e] == '+' || in_[e] == '-')) ++e;
    if (e < in_.size() && Digit(in_[e])) {
      is_double = true;
      at_ = e;
      while (at_ < in_.size() && Digit(in_[at_])) ++at_;
    }
  }
  std::string_view text = in_.substr(start, at_ - start);
  if (text == ".") return Fail("bad number", start);
  if (is_double) {
    tok_.kind = SqlTok::kDouble;
    // strtod needs a terminated string; the text holds only [0-9.eE+-].
    std::string copy(text);
    tok_.d = std::strtod(copy.c_str(), nullptr);
    if (!std::isfinite(tok_.d)) Fail("number out of range", start);
    return;
  }
  if (at_ < in_.size() && (in_[at_] == 'l' || in_[at_] == 'L')) ++at_;  // Java long suffix
  if (text.size() > 1 && text[0] == '0') return Fail("bad number (leading zero)", start);
  tok_.kind = SqlTok::kLong;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), tok_.l);
  if (ec != std::errc() || p != text.data() + text.size()) Fail("integer out of range", start);
}

void SqlLexer::LexString() {
  size_t start = at_++;
  std::string out;
  for (;;) {
    if (at_ >= in_.size()) return Fail("unterminated string", start);
    char c = in_[at_++];
    if (c == '\'') {
      if (at_ < in_.size() && in_[at_] == '\'') {
        out.push_back('\'');
        ++at_;
        continue;
      }
      break;
    }
    out.push_back(c);
  }
  tok_.kind = SqlTok::kString;
  tok_.text = std::move(out);
}

void SqlLexer::Next() {
  SkipSpaceAndComments();
  tok_ = SqlToken{};
  tok_.pos = at_;
  if (!error_.empty() || at_ >= in_.size()) return;  // kEnd
  const char c = in_[at_];
  if (Digit(c) || (c == '.' && at_ + 1 < in_.size() && Digit(in_[at_ + 1]))) return LexNumber();
  if (c == '\'') return LexString();
  if (IdStart(c)) {
    size_t start = at_;
    while (at_ < in_.size() && IdChar(in_[at_])) ++at_;
    std::string_view word = in_.substr(start, at_ - start);
    tok_.kind = Keyword(word);
    tok_.text = std::string(word);
    return;
  }
  std::string_view two = in_.substr(at_, 2);
  static constexpr std::pair<std::string_view, SqlTok> kOps[] = {
      {"<>", SqlTok::kNe}, {"<=", SqlTok::kLe}, {">=", SqlTok::kGe}, {"=", SqlTok::kEq},
      {"<", SqlTok::kLt},  {">", SqlTok::kGt},  {"(", SqlTok::kLParen}, {")", SqlTok::kRParen},
      {",", SqlTok::kComma}, {"+", SqlTok::kPlus}, {"-", SqlTok::kMinus}};
  for (const auto& [text, kind] : kOps) {
    if (two.substr(0, text.size()) == text) {
      tok_.kind = kind;
      at_ += text.size();
      return;
    }
  }
  Fail(fmt::format("unexpected character '{}'", c), at_);
}

}  // namespace tokimq::consumer
