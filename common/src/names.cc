#include "common/names.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/namespace.h"

namespace tokimq {
namespace {

bool ValidChars(std::string_view name, size_t max_bytes) {
  if (name.empty() || name.size() > max_bytes || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A topic or group name, maybe wrapped with a namespace ("ns%name", common/namespace.h): the
// name's own part follows the rule and the whole, namespace included, fits `max_bytes`.
bool ValidName(std::string_view name, size_t max_bytes) {
  const size_t sep = name.find(kNamespaceSeparator);
  if (sep == std::string_view::npos) return ValidChars(name, max_bytes);
  return name.size() <= max_bytes && IsValidNamespace(name.substr(0, sep)) &&
         ValidChars(name.substr(sep + 1), max_bytes);
}

// The rule's addition for a name that carries a namespace.
std::string NamespaceNote(std::string_view name) {
  if (name.find(kNamespaceSeparator) == std::string_view::npos) return {};
  return absl::StrCat(" (a name \"<namespace>%<name>\" counts its namespace; ", kNamespaceRule,
                      ")");
}

}  // namespace

std::string QuoteName(std::string_view name) {
  constexpr size_t kMaxQuoted = 80;
  std::string out;
  for (char c : name.substr(0, kMaxQuoted)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  if (name.size() > kMaxQuoted) out += "...";
  return out;
}

bool IsValidTopicName(std::string_view name) { return ValidName(name, kMaxTopicNameBytes); }
bool IsValidGroupName(std::string_view name) { return ValidName(name, kMaxGroupNameBytes); }

bool IsValidDestination(std::string_view name) {
  if (name.starts_with(kRetryTopicPrefix)) {
    return IsValidGroupName(name.substr(sizeof(kRetryTopicPrefix) - 1));
  }
  if (name.starts_with(kDlqTopicPrefix)) {
    return IsValidGroupName(name.substr(sizeof(kDlqTopicPrefix) - 1));
  }
  return IsValidTopicName(name);
}

absl::Status ValidateTopicName(std::string_view name) {
  if (IsValidTopicName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("invalid topic name '", QuoteName(name),
                                                 "': ", kTopicNameRule, NamespaceNote(name)));
}

absl::Status ValidateGroupName(std::string_view name) {
  if (IsValidGroupName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("invalid group name '", QuoteName(name),
                                                 "': ", kGroupNameRule, NamespaceNote(name)));
}

absl::Status ValidateDestination(std::string_view name) {
  if (IsValidDestination(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid topic name '", QuoteName(name), "': ", kTopicNameRule, ", or ",
                   kRetryTopicPrefix, " / ", kDlqTopicPrefix, " followed by a group name (",
                   kGroupNameRule, ")", NamespaceNote(name)));
}

}  // namespace tokimq
