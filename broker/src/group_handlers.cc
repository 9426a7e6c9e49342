// Broker::HandleGroupAdmin: consumer group configuration requests (CreateGroup, UpdateGroup,
// DescribeGroup; docs/protocol.md "Consumer groups").
#include "broker/broker.h"
#include "common/clock.h"
#include "common/names.h"

namespace tokimq::broker {
namespace {

GroupConfig FromProto(const proto::GroupConfig& p) {
  GroupConfig c;
  c.name = p.name();
  // UNSET in a request: Concurrently (RocketMQ's default for a created group). Values outside
  // the enum stay unknown and are refused by the store.
  c.order = p.delivery_order() == proto::DELIVERY_ORDER_UNSET
                ? DeliveryOrder::kConcurrently
                : static_cast<DeliveryOrder>(static_cast<int>(p.delivery_order()));
  return c;
}

void ToProto(const GroupConfig& c, proto::GroupConfig* out) {
  out->set_name(c.name);
  out->set_delivery_order(static_cast<proto::DeliveryOrder>(static_cast<int>(c.order)));
  out->set_created_ms(c.created_ms);
}

}  // namespace

absl::Status Broker::HandleGroupAdmin(const proto::Request& req, proto::Response* resp) {
  std::string name;
  absl::Status s;
  switch (req.body_case()) {
    case proto::Request::kCreateGroup:
      name = req.create_group().group().name();
      s = group_configs_->Create(FromProto(req.create_group().group()), clock_->NowMs());
      break;
    case proto::Request::kUpdateGroup:
      name = req.update_group().group().name();
      s = group_configs_->Update(FromProto(req.update_group().group()));
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
  ToProto(*c, resp->mutable_group()->mutable_group());
  return absl::OkStatus();
}

}  // namespace tokimq::broker
