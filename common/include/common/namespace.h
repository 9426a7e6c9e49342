// Namespaces (issue 22 item 6; RocketMQ's `namespace`, `x-mq-namespace`, `resource_namespace`):
// resources of different namespaces are separate because the broker stores them under a
// wrapped name, RocketMQ's own convention (NamespaceUtil, RocketMQ 4 clients and the 5.x
// proxy's GrpcConverter.buildResource):
//
//   namespace      := 1..64 characters of [A-Za-z0-9_-]
//   wrapped name   := namespace "%" name              (topics and groups)
//   wrapped retry  := "%RETRY%" namespace "%" group   (a group's retry and DLQ topics keep
//   wrapped DLQ    := "%DLQ%" namespace "%" group      their system prefix in front)
//
// The empty namespace wraps nothing: a name without '%' belongs to no namespace, so data and
// clients from before namespaces are untouched. The broker's own topics (tokimq_sys_*) are
// never wrapped (RocketMQ's isSystemResource). Everything downstream of the entry points
// (stores, ACLs, the cluster's TopicCatalog) sees only wrapped names; the entry points wrap what
// a client names and unwrap what they answer. The name limits of common/names.h apply to the
// wrapped name (RocketMQ checks the stored name: 127 bytes for a topic).
//
// Limit and charset of a namespace: RocketMQ has no separate rule; a namespace becomes part of
// resource names, whose charset is ^[%|a-zA-Z0-9_-]+$ (TopicValidator), minus '%' (the
// separator) and '|' (the tag separator). 64 bytes leaves at least 62 for a topic's own name.
//
// Pure functions; thread-safe. docs/protocol.md "Namespaces", docs/rocketmq-compat.md.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tokimq {

inline constexpr char kNamespaceSeparator = '%';
inline constexpr size_t kMaxNamespaceBytes = 64;
inline constexpr char kNamespaceRule[] = "a namespace is 1..64 characters of [A-Za-z0-9_-]";

bool IsValidNamespace(std::string_view ns);
// OK, or kInvalidArgument "invalid namespace '<ns>': <kNamespaceRule>" (the namespace quoted
// as QuoteName does).
absl::Status ValidateNamespace(std::string_view ns);

// `name` as stored for a client of namespace `ns`: unchanged when `ns` or `name` is empty, for
// the broker's own topics, and when `name` is already wrapped with `ns` (RocketMQ's
// isAlreadyWithNamespace: a RocketMQ 4 client wraps on its side); else as in the grammar above.
// Does not validate: the wrapped name goes through the usual name rule, which refuses a name
// that still holds a '%' of its own (so a client cannot reach into another namespace).
std::string WrapName(std::string_view ns, std::string_view name);

// The namespace of a stored name ("" when it has none), looking past "%RETRY%" / "%DLQ%".
std::string_view NamespaceOf(std::string_view stored);
// The stored name without its namespace ("%RETRY%ns%g" -> "%RETRY%g"); unchanged without one.
std::string WithoutNamespace(std::string_view stored);
// What a client of namespace `ns` is shown for a stored name: WithoutNamespace when the name is
// in `ns` (or `ns` is empty: then the name itself), else the stored name unchanged.
std::string UnwrapFor(std::string_view ns, std::string_view stored);

}  // namespace tokimq
