#include "consumer/tag_filter.h"

namespace tokimq::consumer {

bool TagMatches(std::string_view filter, std::string_view tag) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  filter = trim(filter);
  if (filter.empty() || filter == "*") return true;
  size_t start = 0;
  while (start <= filter.size()) {
    size_t pos = filter.find("||", start);
    std::string_view name =
        trim(filter.substr(start, pos == std::string_view::npos ? std::string_view::npos
                                                                 : pos - start));
    if (!name.empty() && (name == tag || name == "*")) return true;
    if (pos == std::string_view::npos) break;
    start = pos + 2;
  }
  return false;
}

}  // namespace tokimq::consumer
