// Fuzz target: the SQL92 property filter (broker/src/consumer/sql_filter.h, SqlFilter::Parse and
// Evaluate).
//
// Input: the expression text, then (after the first NUL byte, if any) property pairs
// "name=value" separated by NUL bytes.
// Properties: Parse never crashes, hangs or recurses past its bounds; a refusal is
// kInvalidArgument starting "sql filter: "; no expression over kMaxSqlFilterBytes is accepted;
// evaluating an accepted expression twice gives the same answer; and where "NOT (<expr>)" is
// also accepted, it gives the negation (TRUE <-> FALSE, UNKNOWN and errors unchanged).
#include <cstdint>
#include <map>
#include <string>

#include "consumer/sql_filter.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tokimq::consumer::SqlFilter;
  using Truth = SqlFilter::Truth;
  const std::string_view in = tokimq::fuzz::AsView(data, size);
  const size_t nul = in.find('\0');
  const std::string_view expr = in.substr(0, nul);
  std::map<std::string, std::string, std::less<>> props;
  if (nul != std::string_view::npos) {
    std::string_view rest = in.substr(nul + 1);
    while (!rest.empty()) {
      const size_t end = rest.find('\0');
      std::string_view pair = rest.substr(0, end);
      const size_t eq = pair.find('=');
      if (eq != std::string_view::npos) {
        props.emplace(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1)));
      }
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 1);
    }
  }
  auto lookup = [&](std::string_view name, std::string_view* value) {
    auto it = props.find(name);
    if (it == props.end()) return false;
    *value = it->second;
    return true;
  };

  absl::StatusOr<SqlFilter> f = SqlFilter::Parse(expr);
  if (!f.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(f.status()));
    FUZZ_CHECK(f.status().message().substr(0, 12) == "sql filter: ");
    return 0;
  }
  FUZZ_CHECK(expr.size() <= tokimq::consumer::kMaxSqlFilterBytes);
  const Truth t = f->Evaluate(lookup);
  FUZZ_CHECK(f->Evaluate(lookup) == t);
  FUZZ_CHECK(f->Matches(lookup) == (t == Truth::kTrue));

  // A trailing line comment would swallow the closing parenthesis: end it with a newline.
  absl::StatusOr<SqlFilter> negated = SqlFilter::Parse("NOT (" + std::string(expr) + "\n)");
  if (negated.ok()) {
    const Truth n = negated->Evaluate(lookup);
    switch (t) {
      case Truth::kTrue: FUZZ_CHECK(n == Truth::kFalse); break;
      case Truth::kFalse: FUZZ_CHECK(n == Truth::kTrue); break;
      default: FUZZ_CHECK(n == t); break;
    }
  }
  return 0;
}
