// SqlFilter::Evaluate: RocketMQ's evaluation rules (sql_filter.h) over string property values.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "consumer/sql_filter.h"

namespace tokimq::consumer {

using Value = SqlFilter::Value;
using Op = SqlFilter::Op;

namespace {

Value Null() { return Value{}; }
Value Error() {
  Value v;
  v.kind = Value::kError;
  return v;
}
Value Bool(bool b) {
  Value v;
  v.kind = Value::kBool;
  v.b = b;
  return v;
}
Value Unknown() { return Null(); }

// Java Long.valueOf: optional sign, decimal digits, nothing else.
bool ParseLong(std::string_view s, int64_t* out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || s[0] == '+') return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Java Double.valueOf, decimal forms: surrounding whitespace allowed, optional sign, digits
// with an optional fraction and exponent, NaN, Infinity, an optional d/D/f/F suffix. Hex
// floats are not accepted (Java takes them; no RocketMQ user writes them in a property).
bool ParseDouble(std::string_view s, double* out) {
  // Java's trim(): every byte <= ' '.
  while (!s.empty() && static_cast<unsigned char>(s.front()) <= ' ') s.remove_prefix(1);
  while (!s.empty() && static_cast<unsigned char>(s.back()) <= ' ') s.remove_suffix(1);
  if (!s.empty() && (s.back() == 'd' || s.back() == 'D' || s.back() == 'f' || s.back() == 'F')) {
    s.remove_suffix(1);
  }
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "NaN") {
    *out = std::nan("");
    return true;
  }
  if (s == "Infinity") {
    *out = negative ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (s.empty() || !(absl::ascii_isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) {
    return false;
  }
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' &&
        c != 'E' && c != '+' && c != '-') {
      return false;
    }
  }
  std::string copy(s);
  char* end = nullptr;
  const double d = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return false;
  *out = negative ? -d : d;
  return true;
}

template <typename T>
int Cmp(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

// Java Double.compareTo: NaN above everything and equal to itself, -0.0 below 0.0.
int CmpDouble(double a, double b) {
  if (a < b) return -1;
  if (a > b) return 1;
  const bool an = std::isnan(a), bn = std::isnan(b);
  if (an || bn) return an == bn ? 0 : (an ? 1 : -1);
  return Cmp(std::signbit(b), std::signbit(a));
}

Value Double(double d) {
  Value v;
  v.kind = Value::kDouble;
  v.d = d;
  return v;
}

}  // namespace

// RocketMQ's ComparisonExpression.__compare with string conversion on: values of different
// kinds are converted toward the literal's kind; a string that does not convert is an error
// (*error set); kinds that never convert compare as "less" (-1). Neither value is NULL.
int SqlCompare(const Value& l, const Value& r, bool* error) {
  Value a = l, b = r;
  if (a.kind != b.kind) {
    switch (a.kind) {
      case Value::kBool:
        // Java casts the Boolean to String here and throws.
        if (b.kind == Value::kString) *error = true;
        return -1;
      case Value::kLong:
        if (b.kind == Value::kDouble) {
          a = Double(static_cast<double>(a.l));
        } else if (b.kind == Value::kString) {
          if (!ParseLong(b.s, &b.l)) *error = true;
          b.kind = Value::kLong;
        } else {
          return -1;
        }
        break;
      case Value::kDouble:
        if (b.kind == Value::kLong) {
          b = Double(static_cast<double>(b.l));
        } else if (b.kind == Value::kString) {
          if (!ParseDouble(b.s, &b.d)) *error = true;
          b.kind = Value::kDouble;
        } else {
          return -1;
        }
        break;
      case Value::kString:
        if (b.kind == Value::kBool) {
          a = Bool(EqualsIgnoreAsciiCase(a.s, "true"));  // Java Boolean.valueOf
        } else if (b.kind == Value::kLong) {
          if (!ParseLong(a.s, &a.l)) *error = true;
          a.kind = Value::kLong;
        } else if (b.kind == Value::kDouble) {
          if (!ParseDouble(a.s, &a.d)) *error = true;
          a.kind = Value::kDouble;
        } else {
          return -1;
        }
        break;
      default:
        return -1;
    }
    if (*error) return 0;
  }
  switch (a.kind) {
    case Value::kBool: return Cmp(a.b, b.b);
    case Value::kLong: return Cmp(a.l, b.l);
    case Value::kDouble: return CmpDouble(a.d, b.d);
    case Value::kString: return a.s.compare(b.s) < 0 ? -1 : (a.s == b.s ? 0 : 1);
    default: return 0;
  }
}

Value SqlFilter::EvalComparison(const Node& n, Lookup props) const {
  if (n.op == Op::kEq) {
    const Value l = Eval(n.left, props);
    if (l.kind == Value::kError) return l;
    const Value r = Eval(n.right, props);
    if (r.kind == Value::kError) return r;
    if ((l.kind == Value::kNull) != (r.kind == Value::kNull)) {
      return l.kind == Value::kNull ? Unknown() : Bool(false);
    }
    if (l.kind == Value::kNull) return Bool(true);
    bool error = false;
    const int c = SqlCompare(l, r, &error);
    return error ? Error() : Bool(c == 0);
  }
  // >, >=, <, <=: the right side is not evaluated when the left is NULL (as in RocketMQ).
  Value l = Eval(n.left, props);
  if (l.kind == Value::kError || l.kind == Value::kNull) return l;
  Value r = Eval(n.right, props);
  if (r.kind == Value::kError || r.kind == Value::kNull) return r;
  if (l.kind == Value::kString && r.kind == Value::kString) {
    // Two strings (two properties) compare as numbers or not at all.
    if (!ParseDouble(l.s, &l.d) || !ParseDouble(r.s, &r.d)) return Error();
    l.kind = r.kind = Value::kDouble;
  }
  bool error = false;
  const int c = SqlCompare(l, r, &error);
  if (error) return Error();
  switch (n.op) {
    case Op::kGt: return Bool(c > 0);
    case Op::kGe: return Bool(c >= 0);
    case Op::kLt: return Bool(c < 0);
    default: return Bool(c <= 0);
  }
}

Value SqlFilter::Eval(int i, Lookup props) const {
  const Node& n = nodes_[i];
  switch (n.op) {
    case Op::kConst: {
      Value v = n.constant;
      if (v.kind == Value::kString) v.s = n.text;
      return v;
    }
    case Op::kProperty: {
      Value v;
      if (props(n.text, &v.s)) v.kind = Value::kString;
      return v;
    }
    case Op::kNegate: {
      Value v = Eval(n.left, props);
      if (v.kind == Value::kLong) {
        v.l = static_cast<int64_t>(0ULL - static_cast<uint64_t>(v.l));  // Java wraps
        return v;
      }
      if (v.kind == Value::kDouble) return Double(-v.d);
      return v.kind == Value::kError ? v : Null();
    }
    case Op::kNot: {
      Value v = Eval(n.left, props);
      if (v.kind != Value::kBool) return v;  // NULL stays UNKNOWN; errors propagate
      return Bool(!v.b);
    }
    case Op::kBoolCast: {
      Value v = Eval(n.left, props);
      if (v.kind == Value::kNull || v.kind == Value::kError || v.kind == Value::kBool) return v;
      return Bool(false);
    }
    case Op::kAnd:
    case Op::kOr: {
      const bool decisive = n.op == Op::kOr;  // OR: TRUE decides; AND: FALSE decides
      Value l = Eval(n.left, props);
      if (l.kind == Value::kError) return l;
      if (l.kind == Value::kBool && l.b == decisive) return Bool(decisive);
      Value r = Eval(n.right, props);
      if (r.kind == Value::kError) return r;
      if (r.kind == Value::kBool && r.b == decisive) return Bool(decisive);
      if (l.kind != Value::kBool || r.kind != Value::kBool) return Unknown();
      return Bool(!decisive);
    }
    case Op::kIsNull: {
      Value v = Eval(n.left, props);
      return v.kind == Value::kError ? v : Bool(v.kind == Value::kNull);
    }
    case Op::kIn: {
      Value v = Eval(n.left, props);
      if (v.kind != Value::kString) return v.kind == Value::kError ? v : Null();
      bool found = false;
      for (const std::string& s : n.in) found = found || s == v.s;
      return Bool(found != n.negated);
    }
    case Op::kContains:
    case Op::kStartsWith:
    case Op::kEndsWith: {
      // RocketMQ 5: FALSE for an empty search string, a NULL or a non-string value, in both
      // the plain and the NOT form.
      Value v = Eval(n.left, props);
      if (v.kind == Value::kError) return v;
      if (n.text.empty() || v.kind != Value::kString) return Bool(false);
      const bool has = n.op == Op::kContains     ? v.s.find(n.text) != std::string_view::npos
                       : n.op == Op::kStartsWith ? v.s.starts_with(n.text)
                                                 : v.s.ends_with(n.text);
      return Bool(has != n.negated);
    }
    default:
      return EvalComparison(n, props);
  }
}

SqlFilter::Truth SqlFilter::Evaluate(Lookup props) const {
  if (root_ < 0) return Truth::kError;
  const Value v = Eval(root_, props);
  switch (v.kind) {
    case Value::kError: return Truth::kError;
    case Value::kBool: return v.b ? Truth::kTrue : Truth::kFalse;
    default: return Truth::kUnknown;
  }
}

}  // namespace tokimq::consumer
