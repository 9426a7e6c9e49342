#include "common/names.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

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

}  // namespace

std::string QuoteName(std::string_view name) {
  constexpr size_t kMaxQuoted = 80;
  if (name.size() <= kMaxQuoted) return absl::CHexEscape(name);
  return absl::StrCat(absl::CHexEscape(name.substr(0, kMaxQuoted)), "...");
}

bool IsValidTopicName(std::string_view name) { return ValidChars(name, kMaxTopicNameBytes); }
bool IsValidGroupName(std::string_view name) { return ValidChars(name, kMaxGroupNameBytes); }

bool IsValidDestination(std::string_view name) {
  if (absl::StartsWith(name, kRetryTopicPrefix)) {
    return IsValidGroupName(name.substr(sizeof(kRetryTopicPrefix) - 1));
  }
  if (absl::StartsWith(name, kDlqTopicPrefix)) {
    return IsValidGroupName(name.substr(sizeof(kDlqTopicPrefix) - 1));
  }
  return IsValidTopicName(name);
}

absl::Status ValidateTopicName(std::string_view name) {
  if (IsValidTopicName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid topic name '", QuoteName(name), "': ", kTopicNameRule));
}

absl::Status ValidateGroupName(std::string_view name) {
  if (IsValidGroupName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid group name '", QuoteName(name), "': ", kGroupNameRule));
}

absl::Status ValidateDestination(std::string_view name) {
  if (IsValidDestination(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid topic name '", QuoteName(name), "': ", kTopicNameRule, ", or ", kRetryTopicPrefix,
      " / ", kDlqTopicPrefix, " followed by a group name (", kGroupNameRule, ")"));
}

}  // namespace tokimq
