// The wire form (proto::GroupConfig) of a consumer group's configuration and back: one home for
// the conversion used by the group admin handlers and the cluster's group catalog.
#pragma once

#include "broker/group_config_store.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {

// UNSET in a request: Concurrently (RocketMQ's default for a created group). Values outside the
// enum stay unknown and are refused by ValidateGroupConfig.
inline GroupConfig GroupConfigFromProto(const proto::GroupConfig& p) {
  GroupConfig c;
  c.name = p.name();
  c.order = p.delivery_order() == proto::DELIVERY_ORDER_UNSET
                ? DeliveryOrder::kConcurrently
                : static_cast<DeliveryOrder>(static_cast<int>(p.delivery_order()));
  c.created_ms = p.created_ms();
  return c;
}

inline void GroupConfigToProto(const GroupConfig& c, proto::GroupConfig* out) {
  out->set_name(c.name);
  out->set_delivery_order(static_cast<proto::DeliveryOrder>(static_cast<int>(c.order)));
  out->set_created_ms(c.created_ms);
}

}  // namespace tokimq::broker
