// Broker::HandleGroupAdmin: consumer group configuration requests (CreateGroup, UpdateGroup,
// DescribeGroup; docs/protocol.md "Consumer groups").
#include "broker/broker.h"
#include "common/clock.h"
#include "common/names.h"
#include "group_convert.h"

namespace tokimq::broker {

absl::Status Broker::HandleGroupAdmin(const proto::Request& req, proto::Response* resp) {
  std::string name;
  absl::Status s;
  switch (req.body_case()) {
    case proto::Request::kCreateGroup:
      name = req.create_group().group().name();
      s = group_configs_->Create(GroupConfigFromProto(req.create_group().group()),
                                 clock_->NowMs());
      break;
    case proto::Request::kUpdateGroup:
      name = req.update_group().group().name();
      s = group_configs_->Update(GroupConfigFromProto(req.update_group().group()));
      break;
    case proto::Request::kDescribeGroup:
      name = req.describe_group().name();
      break;
    default:
      return absl::InternalError("not a group request");
  }
  if (!s.ok()) return s;
  std::optional<GroupConfig> c = group_configs_->Get(name);
  if (!c) {
    return absl::NotFoundError("subscription group [" + QuoteName(name) +
                               "] does not exist (create it with `tokimq group create`)");
  }
  GroupConfigToProto(*c, resp->mutable_group()->mutable_group());
  return absl::OkStatus();
}

}  // namespace tokimq::broker
