// Namespaces on the native protocol (issue 22 item 6; docs/protocol.md "Namespaces"): a
// connection that gave HandshakeRequest.resource_namespace names topics and groups of that
// namespace. ScopeRequest rewrites such a connection's request to the stored names
// ("<namespace>%<name>", common/namespace.h) before it is admitted (ACLs see the stored names)
// and handled; UnscopeResponse rewrites the answer back, and keeps only the namespace's topics
// and groups in ListTopics and Stats.
//
// Covered: topic and group admin, send, receive, ack / renew / nack, pull and offsets,
// transactions (EndTransaction, the check-back poll), stats and cluster routes. Users, ACLs,
// replication, the manual clock and cluster status are broker-wide and pass unchanged (an ACL
// rule names stored names: "topic:<namespace>%*").
//
// Pure functions over proto messages; thread-safe. `ns` is a valid namespace (checked at the
// handshake), never empty.
#pragma once

#include <string_view>

#include "proto/tokimq.pb.h"

namespace tokimq::broker {

// Wraps the names of `req` for `ns`. A receive is also told to fill the properties map rather
// than send encoded properties (the encoded answer is written straight from the stored records
// and would carry stored names). Stats pages start at the namespace.
void ScopeRequest(std::string_view ns, proto::Request* req);

// Unwraps the names of the answer to a request of kind `kind` that ScopeRequest rewrote.
void UnscopeResponse(std::string_view ns, proto::Request::BodyCase kind, proto::Response* resp);

}  // namespace tokimq::broker
