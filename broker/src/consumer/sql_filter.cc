// SqlFilter::Parse: the recursive-descent parser (grammar in sql_filter.h) over SqlLexer
// (sql_lexer.h).
#include "consumer/sql_filter.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "consumer/sql_lexer.h"
#include "fmt/format.h"

namespace tokimq::consumer {

using Value = SqlFilter::Value;
using Node = SqlFilter::Node;
using Op = SqlFilter::Op;
using Tok = SqlTok;

int SqlCompare(const Value& l, const Value& r, bool* error);  // sql_filter_eval.cc

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
    if (ok() && tok().kind == Tok::kEnd) Fail("empty expression");
    int root = Or();
    if (ok()) root = AsBoolean(root);
    if (ok() && tok().kind != Tok::kEnd) Fail("unexpected token after the expression");
    if (!ok()) return absl::InvalidArgumentError("sql filter: " + lex_.error());
    out_.root_ = root;
    return std::move(out_);
  }

 private:
  // ---- tokens ----
  bool ok() const { return lex_.error().empty(); }
  SqlToken& tok() { return lex_.token(); }
  void Fail(std::string_view what) { Fail(what, tok().pos); }
  void Fail(std::string_view what, size_t pos) { lex_.Fail(what, pos); }
  void Next() { lex_.Next(); }

  bool Accept(Tok kind) {
    if (!ok() || tok().kind != kind) return false;
    Next();
    return true;
  }
  void Expect(Tok kind, std::string_view what) {
    if (!Accept(kind)) Fail(fmt::format("expected {}", what));
  }
  // Whether the token after the current one is `kind` (the grammar's LOOKAHEAD(2)).
  bool PeekIs(Tok kind) {
    SqlLexer saved = lex_;
    lex_.Next();
    const bool is = ok() && tok().kind == kind;
    lex_ = std::move(saved);
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
    if (!ok()) return 0;
    if (IsBoolean(i)) return i;
    if (At(i).op == Op::kProperty) return Unary(Op::kBoolCast, i);
    Fail("expression does not give a boolean value");
    return 0;
  }
  // Operands of >, >=, <, <=, BETWEEN: no boolean expression, no non-numeric literal.
  // `pos`: the operator's byte offset, for the error.
  int Ordered(Op op, int l, int r, size_t pos) {
    for (int i : {l, r}) {
      if (ok() && (IsBoolean(i) || IsConst(i, Value::kString))) {
        Fail("only numbers can be compared with >, >=, <, <= or BETWEEN", pos);
      }
    }
    return ok() ? Binary(op, l, r) : 0;
  }
  int Equal(int l, int r) {
    if (IsConst(l, Value::kNull) || IsConst(r, Value::kNull)) {
      Fail("NULL cannot be compared with = or <>; use IS [NOT] NULL");
    } else if (At(l).op == Op::kConst && At(r).op == Op::kConst && IsBoolean(l) &&
               !IsBoolean(r)) {
      Fail("a boolean literal cannot be compared with a number or string literal");
    }
    return ok() ? Binary(Op::kEq, l, r) : 0;
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
    if (tok().kind != Tok::kString) {
      Fail(fmt::format("expected a string literal after {}", after));
      return {};
    }
    std::string s = std::move(tok().text);
    Next();
    return s;
  }

  // ---- grammar ----
  int Or() {
    int left = And();
    while (Accept(Tok::kOr)) {
      int l = AsBoolean(left);
      int r = AsBoolean(And());
      left = ok() ? Binary(Op::kOr, l, r) : 0;
    }
    return left;
  }
  int And() {
    int left = Equality();
    while (Accept(Tok::kAnd)) {
      int l = AsBoolean(left);
      int r = AsBoolean(Equality());
      left = ok() ? Binary(Op::kAnd, l, r) : 0;
    }
    return left;
  }
  int Equality() {
    int left = Comparison();
    while (ok()) {
      if (Accept(Tok::kEq)) {
        left = Equal(left, Comparison());
      } else if (Accept(Tok::kNe)) {
        int eq = Equal(left, Comparison());
        left = ok() ? Unary(Op::kNot, eq) : 0;
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
    while (ok()) {
      static constexpr std::pair<Tok, Op> kOrdered[] = {
          {Tok::kGt, Op::kGt}, {Tok::kGe, Op::kGe}, {Tok::kLt, Op::kLt}, {Tok::kLe, Op::kLe}};
      bool matched = false;
      const size_t pos = tok().pos;
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
      if (tok().kind == Tok::kNot &&
          (PeekIs(Tok::kBetween) || PeekIs(Tok::kIn) || PeekIs(Tok::kContains) ||
           PeekIs(Tok::kStartsWith) || PeekIs(Tok::kEndsWith))) {
        Next();
        negated = true;
      }
      if (Accept(Tok::kBetween)) {
        int low = UnaryExpr();
        Expect(Tok::kAnd, "AND in BETWEEN");
        int high = UnaryExpr();
        if (ok()) left = Between(left, low, high, negated, pos);
      } else if (Accept(Tok::kIn)) {
        left = In(left, negated);
      } else if (tok().kind == Tok::kContains || tok().kind == Tok::kStartsWith ||
                 tok().kind == Tok::kEndsWith) {
        Op op = tok().kind == Tok::kContains     ? Op::kContains
                : tok().kind == Tok::kStartsWith ? Op::kStartsWith
                                                : Op::kEndsWith;
        std::string what = tok().text;
        Next();
        Node n;
        n.op = op;
        n.left = left;
        n.negated = negated;
        n.text = StringLiteral(what);
        if (ok()) left = Add(std::move(n));
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
    } while (ok() && Accept(Tok::kComma));
    Expect(Tok::kRParen, ") after the IN list");
    return ok() ? Add(std::move(n)) : 0;
  }
  int UnaryExpr() {
    if (!ok()) return 0;
    if (++depth_ > kMaxSqlFilterDepth) {
      Fail(fmt::format("expression nested deeper than {}", kMaxSqlFilterDepth));
      return 0;
    }
    int out = 0;
    if (Accept(Tok::kPlus)) {
      out = UnaryExpr();
    } else if (Accept(Tok::kMinus)) {
      int child = UnaryExpr();
      out = ok() ? Unary(Op::kNegate, child) : 0;
    } else if (Accept(Tok::kNot)) {
      int child = AsBoolean(UnaryExpr());
      out = ok() ? Unary(Op::kNot, child) : 0;
    } else {
      out = Primary();
    }
    --depth_;
    return out;
  }
  int Primary() {
    Node n;
    n.op = Op::kConst;
    switch (tok().kind) {
      case Tok::kString: n.constant.kind = Value::kString; n.text = std::move(tok().text); break;
      case Tok::kLong: n.constant.kind = Value::kLong; n.constant.l = tok().l; break;
      case Tok::kDouble: n.constant.kind = Value::kDouble; n.constant.d = tok().d; break;
      case Tok::kTrue: n.constant.kind = Value::kBool; n.constant.b = true; break;
      case Tok::kFalse: n.constant.kind = Value::kBool; n.constant.b = false; break;
      case Tok::kNull: n.constant.kind = Value::kNull; break;
      case Tok::kId: n.op = Op::kProperty; n.text = std::move(tok().text); break;
      case Tok::kLParen: {
        Next();
        int inner = Or();
        Expect(Tok::kRParen, ")");
        return inner;
      }
      default:
        Fail(tok().kind == Tok::kEnd ? "unexpected end of expression" : "unexpected token");
        return 0;
    }
    Next();
    return Add(std::move(n));
  }

  std::string_view in_;
  SqlLexer lex_{in_};
  int depth_ = 0;
  SqlFilter out_;
};

absl::StatusOr<SqlFilter> SqlFilter::Parse(std::string_view expression) {
  return SqlParser(expression).Run();
}

}  // namespace tokimq::consumer
