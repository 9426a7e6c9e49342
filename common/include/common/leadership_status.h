// The errors a broker of a broker group (issue 20) answers when it cannot take a write because
// the group's leadership is elsewhere or changing, and the one test clients use to retry them.
//
// The broker builds these (ReplicationService::CheckWritable); the cluster producer
// (client::ClusterProducer) and the CLI retry a send after re-reading the route while
// IsLeaderMoved is true. Keeping both sides on these functions is what keeps the retry in step
// with the broker's wording: the status travels as code + text over the native protocol and
// gRPC, so the test is on the code and a marker in the text.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace tokimq {

// kFailedPrecondition: this broker follows in `term`; `leader_address` may be empty (unknown).
absl::Status FollowerError(int64_t term, std::string_view leader_address);
// kFailedPrecondition: this broker led `term` but its election lease may have expired.
absl::Status LeaseMayHaveExpiredError(int64_t term);
// kFailedPrecondition: elected for `term`, its services (consumer state, timer store) are
// starting; usually for tens of milliseconds.
absl::Status BecomingLeaderError(int64_t term);

// True for the three errors above and for kUnavailable / kDeadlineExceeded (the leader is gone
// or unreachable): the write may succeed at the group's next leader, so re-read the route and
// retry. False for every other status (OK included).
bool IsLeaderMoved(const absl::Status& s);

}  // namespace tokimq
