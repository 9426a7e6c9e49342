// SqlFilter::Parse: the lexer and the recursive-descent parser (grammar in sql_filter.h).
#include "consumer/sql_filter.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "fmt/format.h"

namespace tokimq::consumer {

using Value = SqlFilter::Value;
using Node = SqlFilter::Node;
using Op = SqlFilter::Op;

int SqlCompare(const Value& l, const Value& r, bool* error);  // sql_filter_eval.cc

namespace {

enum class Tok {
  kEnd, kId, kString, kLong, kDouble, kLParen, kRParen, kComma, kEq, kNe, kLt, kLe, kGt, kGe,
  kPlus, kMinus, kNot, kAnd, kOr, kBetween, kIn, kTrue, kFalse, kNull, kIs, kContains,
  kStartsWith, kEndsWith
};

struct Token {
  Tok kind = Tok::kEnd;
  size_t pos = 0;
  std::string text;  // identifier name, decoded string literal
  int64_t l = 0;
  double d = 0;
};

Tok Keyword(std::string_view word) {
  static constexpr std::pair<std::string_view, Tok> kWords[] = {
      {"NOT", Tok::kNot},           {"AND", Tok::kAnd},         {"OR", Tok::kOr},
      {"BETWEEN", Tok::kBetween},   {"IN", Tok::kIn},           {"TRUE", Tok::kTrue},
      {"FALSE", Tok::kFalse},       {"NULL", Tok::kNull},       {"IS", Tok::kIs},
      {"CONTAINS", Tok::kContains}, {"STARTSWITH", Tok::kStartsWith},
      {"ENDSWITH", Tok::kEndsWith}};
  for (const auto& [w, t] : kWords) {
    if (EqualsIgnoreAsciiCase(w, word)) return t;
  }
  return Tok::kId;
}

bool IdStart(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }
bool IdChar(char c) { return IdStart(c) || absl::ascii_isdigit(static_cast<unsigned char>(c)); }
bool Digit(char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }

}  // namespace

bool EqualsIgnoreAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(a[i])) !=
        absl::ascii_tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Builds a SqlFilter's nodes; one instance per Parse call.
class SqlParser {
 public:
  explicit SqlParser(std::string_view in) : in_(in) {}

  absl::StatusOr<SqlFilter> Run() {
    if (in_.size() > kMaxSqlFilterBytes) {
      return absl::InvalidArgumentError(fmt::format(
          "sql filter: expression of {} bytes, at most {}", in_.size(), kMaxSqlFilterBytes));
    }
    Next();
    if (error_.empty() && tok_.kind == Tok::kEnd) Fail("empty expression");
    int root = Or();
    if (error_.empty()) root = AsBoolean(root);
    if (error_.empty() && tok_.kind != Tok::kEnd) Fail("unexpected token after the expression");
    if (!error_.empty()) return absl::InvalidArgumentError("sql filter: " + error_);
    out_.root_ = root;
    return std::move(out_);
  }

 private:
  // ---- lexer ----
  void Fail(std::string_view what) { Fail(what, tok_.pos); }
  void Fail(std::string_view what, size_t pos) {
    if (error_.empty()) error_ = fmt::format("{} at byte {}", what, pos);
  }

  void SkipSpaceAndComments() {
    for (;;) {
      while (at_ < in_.size() && std::string_view(" \t\n\r\f").find(in_[at_]) != std::string_view::npos) {
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

  void LexNumber() {
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
      tok_.kind = Tok::kDouble;
      // strtod needs a terminated string; the text holds only [0-9.eE+-].
      std::string copy(text);
      tok_.d = std::strtod(copy.c_str(), nullptr);
      if (!std::isfinite(tok_.d)) Fail("number out of range", start);
      return;
    }
    if (at_ < in_.size() && (in_[at_] == 'l' || in_[at_] == 'L')) ++at_;  // Java long suffix
    if (text.size() > 1 && text[0] == '0') return Fail("bad number (leading zero)", start);
    tok_.kind = Tok::kLong;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), tok_.l);
    if (ec != std::errc() || p != text.data() + text.size()) Fail("integer out of range", start);
  }

  void LexString() {
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
    tok_.kind = Tok::kString;
    tok_.text = std::move(out);
  }

  void Next() {
    SkipSpaceAndComments();
    tok_ = Token{};
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
    static constexpr std::pair<std::string_view, Tok> kOps[] = {
        {"<>", Tok::kNe}, {"<=", Tok::kLe}, {">=", Tok::kGe}, {"=", Tok::kEq},
        {"<", Tok::kLt},  {">", Tok::kGt},  {"(", Tok::kLParen}, {")", Tok::kRParen},
        {",", Tok::kComma}, {"+", Tok::kPlus}, {"-", Tok::kMinus}};
    for (const auto& [text, kind] : kOps) {
      if (two.substr(0, text.size()) == text) {
        tok_.kind = kind;
        at_ += text.size();
        return;
      }
    }
    Fail(fmt::format("unexpected character '{}'", c), at_);
  }

  bool Accept(Tok kind) {
    if (!error_.empty() || tok_.kind != kind) return false;
    Next();
    return true;
  }
  void Expect(Tok kind, std::string_view what) {
    if (!Accept(kind)) Fail(fmt::format("expected {}", what));
  }
  // Whether the token after the current one is `kind` (the grammar's LOOKAHEAD(2)).
  bool PeekIs(Tok kind) {
    const size_t at = at_;
    Token saved = tok_;
    std::string error = error_;
    Next();
    const bool is = error_.empty() && tok_.kind == kind;
    at_ = at;
    tok_ = std::move(saved);
    error_ = std::move(error);
    return is;
  }

  // ---- nodes and RocketMQ's parse-time operand checks ----
  int Add(Node n) {
    if (static_cast<int>(out_.nodes_.size()) >= kMaxSqlFilterNodes) {
      Fail(fmt::format("expression has more than {} nodes", kMaxSqlFilterNodes));
      return 0;
    }
    out_.nodes_.push_back(std::move(n));
    return static_cast<int>(out_.nodes_.size()) - 1;
  }
  int Binary(Op op, int l, int r) {
    Node n;
    n.op = op;
    n.left = l;
    n.right = r;
    return Add(std::move(n));
  }
  int Unary(Op op, int child) { return Binary(op, child, -1); }
  // Node i; after an error (when operands may be missing) a constant NULL.
  const Node& At(int i) const {
    static const Node kNone;
    if (i < 0 || i >= static_cast<int>(out_.nodes_.size())) return kNone;
    return out_.nodes_[i];
  }

  bool IsConst(int i, Value::Kind k) const {
    return At(i).op == Op::kConst && At(i).constant.kind == k;
  }
  // RocketMQ's BooleanExpression: comparisons, logic, TRUE/FALSE/NULL literals.
  bool IsBoolean(int i) const {
    switch (At(i).op) {
      case Op::kConst: return IsConst(i, Value::kBool) || IsConst(i, Value::kNull);
      case Op::kProperty:
      case Op::kNegate: return false;
      default: return true;
    }
  }
  int AsBoolean(int i) {
    if (!error_.empty()) return 0;
    if (IsBoolean(i)) return i;
    if (At(i).op == Op::kProperty) return Unary(Op::kBoolCast, i);
    Fail("expression does not give a boolean value");
    return 0;
  }
  // Operands of >, >=, <, <=, BETWEEN: no boolean expression, no non-numeric literal.
  // `pos`: the operator's byte offset, for the error.
  int Ordered(Op op, int l, int r, size_t pos) {
    for (int i : {l, r}) {
      if (error_.empty() && (IsBoolean(i) || IsConst(i, Value::kString))) {
        Fail("only numbers can be compared with >, >=, <, <= or BETWEEN", pos);
      }
    }
    return error_.empty() ? Binary(op, l, r) : 0;
  }
  int Equal(int l, int r) {
    if (IsConst(l, Value::kNull) || IsConst(r, Value::kNull)) {
      Fail("NULL cannot be compared with = or <>; use IS [NOT] NULL");
    } else if (At(l).op == Op::kConst && At(r).op == Op::kConst && IsBoolean(l) &&
               !IsBoolean(r)) {
      Fail("a boolean literal cannot be compared with a number or string literal");
    }
    return error_.empty() ? Binary(Op::kEq, l, r) : 0;
  }
  int Between(int value, int low, int high, bool negated, size_t pos) {
    if (!negated && At(low).op == Op::kConst && At(high).op == Op::kConst) {
      const Value& lo = At(low).constant;
      const Value& hi = At(high).constant;
      bool bad = false;
      if (lo.kind == Value::kNull || hi.kind == Value::kNull) {
        Fail("BETWEEN bounds cannot be NULL", pos);
      } else if (lo.kind != Value::kString && hi.kind != Value::kString &&
                 SqlCompare(hi, lo, &bad) < 0 && !bad) {
        Fail("BETWEEN needs the lower bound first", pos);
      }
    }
    if (negated) {
      return Binary(Op::kOr, Ordered(Op::kLt, value, low, pos),
                    Ordered(Op::kGt, value, high, pos));
    }
    return Binary(Op::kAnd, Ordered(Op::kGe, value, low, pos),
                  Ordered(Op::kLe, value, high, pos));
  }

  std::string StringLiteral(std::string_view after) {
    if (tok_.kind != Tok::kString) {
      Fail(fmt::format("expected a string literal after {}", after));
      return {};
    }
    std::string s = std::move(tok_.text);
    Next();
    return s;
  }

  // ---- grammar ----
  int Or() {
    int left = And();
    while (Accept(Tok::kOr)) {
      int l = AsBoolean(left);
      int r = AsBoolean(And());
      left = error_.empty() ? Binary(Op::kOr, l, r) : 0;
    }
    return left;
  }
  int And() {
    int left = Equality();
    while (Accept(Tok::kAnd)) {
      int l = AsBoolean(left);
      int r = AsBoolean(Equality());
      left = error_.empty() ? Binary(Op::kAnd, l, r) : 0;
    }
    return left;
  }
  int Equality() {
    int left = Comparison();
    while (error_.empty()) {
      if (Accept(Tok::kEq)) {
        left = Equal(left, Comparison());
      } else if (Accept(Tok::kNe)) {
        int eq = Equal(left, Comparison());
        left = error_.empty() ? Unary(Op::kNot, eq) : 0;
      } else if (Accept(Tok::kIs)) {
        bool negated = Accept(Tok::kNot);
        Expect(Tok::kNull, "NULL after IS");
        int is_null = Unary(Op::kIsNull, left);
        left = negated ? Unary(Op::kNot, is_null) : is_null;
      } else {
        break;
      }
    }
    return left;
  }
  int Comparison() {
    int left = UnaryExpr();
    while (error_.empty()) {
      static constexpr std::pair<Tok, Op> kOrdered[] = {
          {Tok::kGt, Op::kGt}, {Tok::kGe, Op::kGe}, {Tok::kLt, Op::kLt}, {Tok::kLe, Op::kLe}};
      bool matched = false;
      const size_t pos = tok_.pos;
      for (const auto& [tok, op] : kOrdered) {
        if (Accept(tok)) {
          const int right = UnaryExpr();
          left = Ordered(op, left, right, pos);
          matched = true;
          break;
        }
      }
      if (matched) continue;
      bool negated = false;
      if (tok_.kind == Tok::kNot &&
          (PeekIs(Tok::kBetween) || PeekIs(Tok::kIn) || PeekIs(Tok::kContains) ||
           PeekIs(Tok::kStartsWith) || PeekIs(Tok::kEndsWith))) {
        Next();
        negated = true;
      }
      if (Accept(Tok::kBetween)) {
        int low = UnaryExpr();
        Expect(Tok::kAnd, "AND in BETWEEN");
        int high = UnaryExpr();
        if (error_.empty()) left = Between(left, low, high, negated, pos);
      } else if (Accept(Tok::kIn)) {
        left = In(left, negated);
      } else if (tok_.kind == Tok::kContains || tok_.kind == Tok::kStartsWith ||
                 tok_.kind == Tok::kEndsWith) {
        Op op = tok_.kind == Tok::kContains     ? Op::kContains
                : tok_.kind == Tok::kStartsWith ? Op::kStartsWith
                                                : Op::kEndsWith;
        std::string what = tok_.text;
        Next();
        Node n;
        n.op = op;
        n.left = left;
        n.negated = negated;
        n.text = StringLiteral(what);
        if (error_.empty()) left = Add(std::move(n));
      } else {
        break;
      }
    }
    return left;
  }
  int In(int left, bool negated) {
    if (At(left).op != Op::kProperty) Fail("IN needs a property on its left");
    Node n;
    n.op = Op::kIn;
    n.left = left;
    n.negated = negated;
    Expect(Tok::kLParen, "( after IN");
    do {
      n.in.push_back(StringLiteral("IN ("));
      if (static_cast<int>(n.in.size()) > kMaxSqlFilterNodes) Fail("IN list too long");
    } while (error_.empty() && Accept(Tok::kComma));
    Expect(Tok::kRParen, ") after the IN list");
    return error_.empty() ? Add(std::move(n)) : 0;
  }
  int UnaryExpr() {
    if (!error_.empty()) return 0;
    if (++depth_ > kMaxSqlFilterDepth) {
      Fail(fmt::format("expression nested deeper than {}", kMaxSqlFilterDepth));
      return 0;
    }
    int out = 0;
    if (Accept(Tok::kPlus)) {
      out = UnaryExpr();
    } else if (Accept(Tok::kMinus)) {
      int child = UnaryExpr();
      out = error_.empty() ? Unary(Op::kNegate, child) : 0;
    } else if (Accept(Tok::kNot)) {
      int child = AsBoolean(UnaryExpr());
      out = error_.empty() ? Unary(Op::kNot, child) : 0;
    } else {
      out = Primary();
    }
    --depth_;
    return out;
  }
  int Primary() {
    Node n;
    n.op = Op::kConst;
    switch (tok_.kind) {
      case Tok::kString: n.constant.kind = Value::kString; n.text = std::move(tok_.text); break;
      case Tok::kLong: n.constant.kind = Value::kLong; n.constant.l = tok_.l; break;
      case Tok::kDouble: n.constant.kind = Value::kDouble; n.constant.d = tok_.d; break;
      case Tok::kTrue: n.constant.kind = Value::kBool; n.constant.b = true; break;
      case Tok::kFalse: n.constant.kind = Value::kBool; n.constant.b = false; break;
      case Tok::kNull: n.constant.kind = Value::kNull; break;
      case Tok::kId: n.op = Op::kProperty; n.text = std::move(tok_.text); break;
      case Tok::kLParen: {
        Next();
        int inner = Or();
        Expect(Tok::kRParen, ")");
        return inner;
      }
      default:
        Fail(tok_.kind == Tok::kEnd ? "unexpected end of expression" : "unexpected token");
        return 0;
    }
    Next();
    return Add(std::move(n));
  }

  std::string_view in_;
  size_t at_ = 0;
  Token tok_;
  int depth_ = 0;
  std::string error_;
  SqlFilter out_;
};

absl::StatusOr<SqlFilter> SqlFilter::Parse(std::string_view expression) {
  return SqlParser(expression).Run();
}

}  // namespace tokimq::consumer
