#include "common/leadership_status.h"

#include <string>

#include "fmt/format.h"

namespace tokimq {
namespace {

// Every text below holds one of these; IsLeaderMoved looks for them.
constexpr std::string_view kFollowerMarker = "a follower";
constexpr std::string_view kBecomingMarker = "becoming the leader";

}  // namespace

absl::Status FollowerError(int64_t term, std::string_view leader_address) {
  return absl::FailedPreconditionError(
      fmt::format("this broker is {} in term {} (leader: {}); send to the leader", kFollowerMarker,
                  term, leader_address.empty() ? std::string_view("unknown") : leader_address));
}

absl::Status LeaseMayHaveExpiredError(int64_t term) {
  return absl::FailedPreconditionError(
      fmt::format("this broker led term {} but its election lease may have expired: not a leader "
                  "({} until the election decides)",
                  term, kFollowerMarker));
}

absl::Status BecomingLeaderError(int64_t term) {
  return absl::FailedPreconditionError(fmt::format(
      "this broker is {} of term {}: its services are starting; retry", kBecomingMarker, term));
}

bool IsLeaderMoved(const absl::Status& s) {
  if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) return true;
  if (!absl::IsFailedPrecondition(s)) return false;
  const std::string_view m(s.message().data(), s.message().size());  // absl::string_view here
  return m.find(kFollowerMarker) != std::string_view::npos ||
         m.find(kBecomingMarker) != std::string_view::npos;
}

}  // namespace tokimq
