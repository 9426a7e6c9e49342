// ClusterGroups: consumer-group settings of a broker in a cluster (issue 19 item 3;
// docs/cluster.md "Consumer groups"). Owned by the ClusterNode.
//
// CreateGroup / UpdateGroup (`tokimq group create|update`, through any broker) become one etcd
// transaction each (cluster/group_catalog.h) and are applied to this broker's GroupConfigStore
// at once; every other broker applies them from its watch. Receives keep reading the delivery
// order from the local store (no etcd on the data path; etcd down: the last applied settings
// hold, group admin answers UNAVAILABLE). DescribeGroup stays local.
//
// Local groups the cluster does not have (configured before the broker joined the cluster) are
// kept and stay local: there is no group delete request to mirror.
//
// Thread-safety: Intercept from any number of threads; the watch thread applies changes.
// Lifetime: Start once; Stop before the Broker closes; the EtcdClient outlives it.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {
class EtcdClient;
class GroupCatalog;
}  // namespace tokimq::cluster

namespace tokimq::broker {

class Broker;

class ClusterGroups {
 public:
  ClusterGroups(Broker* broker, cluster::EtcdClient* etcd, std::string cluster);
  ~ClusterGroups();

  // Starts the watch of the cluster's consumer groups.
  void Start();
  void Stop();
  // Answers CreateGroup / UpdateGroup; false for every other request.
  bool Intercept(const proto::Request& req, proto::Response* resp);

 private:
  absl::Status Create(const proto::GroupConfig& want, proto::Response* resp);
  absl::Status Update(const proto::GroupConfig& want, proto::Response* resp);
  void ApplyLocal(const proto::GroupConfig& group);

  Broker* broker_;
  std::string cluster_;
  std::unique_ptr<cluster::GroupCatalog> catalog_;
};

}  // namespace tokimq::broker
