// The access-control model (issue 17; RocketMQ 5 ACL 2.0): users, resources, actions and the
// rule matching that decides whether a user may perform an action on a resource.
//
//   resource pattern := "topic:" NAME | "topic:" PREFIX "*" | "group:" NAME | "group:" PREFIX "*"
//                     | "*"
//   actions          := subset of {pub, sub, admin}, written "pub,sub"
//   decision         := allow | deny
//
// Matching (RocketMQ's DefaultAuthorizationHandler order): among the user's rules whose pattern
// matches the resource and whose actions contain the requested action, the most specific level
// wins: an exact name, then a prefix (the longer prefix first), then "*". At the winning level
// a deny beats an allow. No matching rule: deny. A super user bypasses the rules; a disabled
// user is refused everything. The cluster resource (users, ACLs, the manual clock, timer
// checkpoints) is matched by "*" only. See docs/security.md.
//
// Values of the persisted enums (docs/formats/auth.md) are never renumbered. Pure functions and
// value types; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tokimq::broker::auth {

// Bits of an ActionSet. Persisted: never renumber.
enum Action : uint8_t { kPub = 1, kSub = 2, kAdmin = 4 };
using ActionSet = uint8_t;
inline constexpr ActionSet kAllActions = kPub | kSub | kAdmin;

// Persisted: never renumber.
enum class Decision : uint8_t { kAllow = 1, kDeny = 2 };
enum class UserType : uint8_t { kSuper = 1, kNormal = 2 };

enum class ResourceKind : uint8_t { kTopic, kGroup, kCluster };

// A concrete resource one request touches.
struct Resource {
  ResourceKind kind = ResourceKind::kCluster;
  std::string name;  // empty for the cluster

  static Resource Topic(std::string name) { return {ResourceKind::kTopic, std::move(name)}; }
  static Resource Group(std::string name) { return {ResourceKind::kGroup, std::move(name)}; }
  static Resource Cluster() { return {ResourceKind::kCluster, {}}; }
  std::string ToString() const;  // "topic:orders", "group:billing", "cluster"
};

// The resource side of a rule (see the grammar above).
struct ResourcePattern {
  bool any = false;                          // "*"
  ResourceKind kind = ResourceKind::kTopic;  // kTopic or kGroup unless any
  std::string name;                          // the name, or the prefix without its '*'
  bool prefix = false;

  std::string ToString() const;
  bool Matches(const Resource& r) const;
  bool operator==(const ResourcePattern&) const = default;
};

// kInvalidArgument naming the problem: unknown kind, empty name, a '*' other than the last
// character, a name with characters outside [A-Za-z0-9._%-].
absl::StatusOr<ResourcePattern> ParseResourcePattern(std::string_view text);

// "pub,sub" -> kPub|kSub (any order, no repeats needed); kInvalidArgument for an unknown or
// empty list.
absl::StatusOr<ActionSet> ParseActions(std::string_view text);
std::string ActionsToString(ActionSet actions);  // "pub,sub,admin" order; "" for none

struct AclRule {
  ResourcePattern resource;
  ActionSet actions = 0;
  Decision decision = Decision::kAllow;
  bool operator==(const AclRule&) const = default;
};

struct User {
  std::string access_key;
  std::string secret_key;  // never logged, never sent by the broker
  UserType type = UserType::kNormal;
  bool enabled = true;
};

// Access keys: 3..64 of [A-Za-z0-9._-] (a key is part of a RocksDB key and of the RocketMQ
// authorization header, where ',' '=' and ' ' separate fields). Secret keys: 6..128 printable
// ASCII characters other than space. kInvalidArgument naming the field.
absl::Status ValidateAccessKey(std::string_view access_key);
absl::Status ValidateSecretKey(std::string_view secret_key);

// The matching rule of the header comment for a normal user's rules. Super users and disabled
// users are the caller's concern (AuthStore::Allows).
bool RulesAllow(const std::vector<AclRule>& rules, const Resource& resource, Action action);

}  // namespace tokimq::broker::auth
