#include "broker/auth/acl.h"

#include <optional>

#include "fmt/format.h"

namespace tokimq::broker::auth {
namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '%';
}

const char* KindName(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kTopic:
      return "topic";
    case ResourceKind::kGroup:
      return "group";
    case ResourceKind::kCluster:
      return "cluster";
  }
  return "?";
}

// Specificity of a matching pattern: exact above every prefix, a longer prefix above a shorter
// one, "*" lowest.
int64_t Level(const ResourcePattern& p) {
  if (p.any) return 0;
  if (p.prefix) return 1 + static_cast<int64_t>(p.name.size());
  return INT64_MAX;
}

}  // namespace

std::string Resource::ToString() const {
  if (kind == ResourceKind::kCluster) return "cluster";
  return fmt::format("{}:{}", KindName(kind), name);
}

std::string ResourcePattern::ToString() const {
  if (any) return "*";
  return fmt::format("{}:{}{}", KindName(kind), name, prefix ? "*" : "");
}

bool ResourcePattern::Matches(const Resource& r) const {
  if (any) return true;
  if (r.kind != kind) return false;
  if (prefix) return r.name.size() >= name.size() && r.name.compare(0, name.size(), name) == 0;
  return r.name == name;
}

absl::StatusOr<ResourcePattern> ParseResourcePattern(std::string_view text) {
  ResourcePattern p;
  if (text == "*") {
    p.any = true;
    return p;
  }
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(fmt::format(
        "resource '{}' is not topic:NAME, topic:PREFIX*, group:NAME, group:PREFIX* or *", text));
  }
  const std::string_view kind = text.substr(0, colon);
  std::string_view name = text.substr(colon + 1);
  if (kind == "topic") {
    p.kind = ResourceKind::kTopic;
  } else if (kind == "group") {
    p.kind = ResourceKind::kGroup;
  } else {
    return absl::InvalidArgumentError(
        fmt::format("resource '{}': unknown kind '{}' (topic or group)", text, kind));
  }
  if (!name.empty() && name.back() == '*') {
    p.prefix = true;
    name.remove_suffix(1);
  }
  if (name.empty() && !p.prefix) {
    return absl::InvalidArgumentError(fmt::format("resource '{}': empty name", text));
  }
  if (name.size() > 255) {
    return absl::InvalidArgumentError(fmt::format("resource '{}': name too long", text));
  }
  for (char c : name) {
    if (!NameChar(c)) {
      return absl::InvalidArgumentError(
          fmt::format("resource '{}': '*' only at the end, names of [A-Za-z0-9._%-] only", text));
    }
  }
  p.name = std::string(name);
  return p;
}

absl::StatusOr<ActionSet> ParseActions(std::string_view text) {
  ActionSet set = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (word == "pub") {
      set |= kPub;
    } else if (word == "sub") {
      set |= kSub;
    } else if (word == "admin") {
      set |= kAdmin;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("unknown action '{}' (pub, sub, admin, comma-separated)", word));
    }
    start = end + 1;
  }
  return set;
}

std::string ActionsToString(ActionSet actions) {
  std::string out;
  for (auto [bit, name] : {std::pair{kPub, "pub"}, {kSub, "sub"}, {kAdmin, "admin"}}) {
    if ((actions & bit) == 0) continue;
    if (!out.empty()) out += ',';
    out += name;
  }
  return out;
}

absl::Status ValidateAccessKey(std::string_view ak) {
  if (ak.size() < 3 || ak.size() > 64) {
    return absl::InvalidArgumentError("access key must be 3..64 characters");
  }
  for (char c : ak) {
    if (!NameChar(c) || c == '%') {
      return absl::InvalidArgumentError("access key may hold only [A-Za-z0-9._-]");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSecretKey(std::string_view sk) {
  if (sk.size() < 6 || sk.size() > 128) {
    return absl::InvalidArgumentError("secret key must be 6..128 characters");
  }
  for (char c : sk) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError("secret key may hold only printable ASCII, no spaces");
    }
  }
  return absl::OkStatus();
}

bool RulesAllow(const std::vector<AclRule>& rules, const Resource& resource, Action action) {
  std::optional<int64_t> best;
  bool deny = false;
  for (const AclRule& rule : rules) {
    if ((rule.actions & action) == 0 || !rule.resource.Matches(resource)) continue;
    if (resource.kind == ResourceKind::kCluster && !rule.resource.any) continue;
    const int64_t level = Level(rule.resource);
    if (!best || level > *best) {
      best = level;
      deny = false;
    }
    if (level == *best && rule.decision == Decision::kDeny) deny = true;
  }
  return best.has_value() && !deny;
}

}  // namespace tokimq::broker::auth
