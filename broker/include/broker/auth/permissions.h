// The permission table: which action on which resource each native request needs (issue 17,
// after RocketMQ 5 ACL 2.0's table), and the per-request authorization built on it. The
// RocketMQ gRPC endpoint authorizes through the same table: it checks the native requests it
// builds (rocketmq/src/auth_check.h). docs/security.md "Permission table" is the user's copy.
//
// Pure functions over an AuthStore (which locks itself); thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "broker/auth/acl.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker::auth {

class AuthStore;

// One condition: the user may perform at least one action of `any_of` on `resource`.
struct Requirement {
  Resource resource;
  ActionSet any_of = 0;
};

// What `req` needs; every requirement must hold. Empty: any authenticated user (the answer may
// then be filtered, see FilterResponse). Handshake and Authenticate are the server's concern
// and need nothing here.
std::vector<Requirement> RequirementsOf(const proto::Request& req);

// OK when the user `access_key` meets every requirement of `req`; else kPermissionDenied
// naming the first resource and actions missing (the caller is authenticated by then, so the
// text helps the operator and tells a guesser nothing new).
absl::Status Authorize(const AuthStore& store, const std::string& access_key,
                       const proto::Request& req);
absl::Status CheckRequirements(const AuthStore& store, const std::string& access_key,
                               const std::vector<Requirement>& requirements);

// Removes from an answer to ListTopics / Stats what the user may not see: topics on which it
// has none of pub, sub, admin; groups on which it has neither sub nor admin. Other answers are
// left alone.
void FilterResponse(const AuthStore& store, const std::string& access_key,
                    const proto::Request& req, proto::Response* resp);

}  // namespace tokimq::broker::auth
