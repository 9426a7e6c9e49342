#include "cluster_groups.h"

#include "broker/broker.h"
#include "cluster/group_catalog.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "group_convert.h"
#include "proto/status.h"

namespace tokimq::broker {

ClusterGroups::ClusterGroups(Broker* broker, cluster::EtcdClient* etcd, std::string cluster)
    : broker_(broker),
      cluster_(std::move(cluster)),
      catalog_(std::make_unique<cluster::GroupCatalog>(etcd, cluster_)) {}

ClusterGroups::~ClusterGroups() { Stop(); }

void ClusterGroups::Start() {
  catalog_->Watch([this](const std::map<std::string, proto::GroupConfig>& groups, bool) {
    for (const auto& [name, g] : groups) ApplyLocal(g);
  });
}

void ClusterGroups::Stop() { catalog_->Stop(); }

bool ClusterGroups::Intercept(const proto::Request& req, proto::Response* resp) {
  absl::Status s;
  switch (req.body_case()) {
    case proto::Request::kCreateGroup:
      s = Create(req.create_group().group(), resp);
      break;
    case proto::Request::kUpdateGroup:
      s = Update(req.update_group().group(), resp);
      break;
    default:
      return false;
  }
  if (!s.ok()) {
    resp->clear_body();
    wire::ToProto(s, resp->mutable_status());
  }
  return true;
}

absl::Status ClusterGroups::Create(const proto::GroupConfig& want, proto::Response* resp) {
  GroupConfig c = GroupConfigFromProto(want);
  c.created_ms = broker_->clock()->NowMs();
  TOKIMQ_RETURN_IF_ERROR(ValidateGroupConfig(c));
  proto::GroupConfig g;
  GroupConfigToProto(c, &g);
  TOKIMQ_RETURN_IF_ERROR(catalog_->Create(g).status());
  TOKIMQ_LOG_INFO("cluster {}: consumer group {} created ({})", cluster_, c.name,
                  DeliveryOrderName(c.order));
  ApplyLocal(g);
  *resp->mutable_group()->mutable_group() = g;
  return absl::OkStatus();
}

absl::Status ClusterGroups::Update(const proto::GroupConfig& want, proto::Response* resp) {
  GroupConfig c = GroupConfigFromProto(want);
  TOKIMQ_RETURN_IF_ERROR(ValidateGroupConfig(c));
  auto change = [&](proto::GroupConfig* g) {
    g->set_delivery_order(want.delivery_order() == proto::DELIVERY_ORDER_UNSET
                              ? proto::CONCURRENTLY
                              : want.delivery_order());
    return absl::OkStatus();
  };
  absl::StatusOr<proto::GroupConfig> g = catalog_->Update(c.name, change);
  if (absl::IsNotFound(g.status())) {
    // The broker's own wording (RocketMQ's), as on a single broker.
    return absl::NotFoundError("subscription group [" + c.name +
                               "] does not exist (create it with `tokimq group create`)");
  }
  TOKIMQ_RETURN_IF_ERROR(g.status());
  ApplyLocal(*g);
  *resp->mutable_group()->mutable_group() = *g;
  return absl::OkStatus();
}

void ClusterGroups::ApplyLocal(const proto::GroupConfig& g) {
  absl::Status s = broker_->group_configs()->Apply(GroupConfigFromProto(g));
  if (!s.ok()) {
    TOKIMQ_LOG_ERROR("cluster {}: cannot apply consumer group {} locally: {}", cluster_, g.name(),
                     s.ToString());
  }
}

}  // namespace tokimq::broker
