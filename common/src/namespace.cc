#include "common/namespace.h"

#include "absl/strings/str_cat.h"
#include "common/names.h"

namespace tokimq {
namespace {

// The system prefix of a retry / DLQ topic ("" for none).
std::string_view SystemPrefix(std::string_view name) {
  if (name.starts_with(kRetryTopicPrefix)) return kRetryTopicPrefix;
  if (name.starts_with(kDlqTopicPrefix)) return kDlqTopicPrefix;
  return {};
}

}  // namespace

bool IsValidNamespace(std::string_view ns) {
  if (ns.empty() || ns.size() > kMaxNamespaceBytes) return false;
  for (char c : ns) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::Status ValidateNamespace(std::string_view ns) {
  if (IsValidNamespace(ns)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid namespace '", QuoteName(ns), "': ", std::string(kNamespaceRule)));
}

std::string WrapName(std::string_view ns, std::string_view name) {
  if (ns.empty() || name.empty() || name.starts_with(kSystemTopicPrefix)) {
    return std::string(name);
  }
  const std::string_view prefix = SystemPrefix(name);
  const std::string_view rest = name.substr(prefix.size());
  if (rest.size() > ns.size() && rest.starts_with(ns) && rest[ns.size()] == kNamespaceSeparator) {
    return std::string(name);  // already wrapped with `ns`
  }
  std::string out;
  out.reserve(prefix.size() + ns.size() + 1 + rest.size());
  out.append(prefix).append(ns).push_back(kNamespaceSeparator);
  return out.append(rest);
}

std::string_view NamespaceOf(std::string_view stored) {
  const std::string_view rest = stored.substr(SystemPrefix(stored).size());
  const size_t sep = rest.find(kNamespaceSeparator);
  if (sep == std::string_view::npos || sep == 0) return {};
  return rest.substr(0, sep);
}

std::string WithoutNamespace(std::string_view stored) {
  const std::string_view ns = NamespaceOf(stored);
  if (ns.empty()) return std::string(stored);
  const std::string_view prefix = SystemPrefix(stored);
  return std::string(prefix).append(stored.substr(prefix.size() + ns.size() + 1));
}

std::string UnwrapFor(std::string_view ns, std::string_view stored) {
  if (ns.empty() || NamespaceOf(stored) != ns) return std::string(stored);
  return WithoutNamespace(stored);
}

}  // namespace tokimq
