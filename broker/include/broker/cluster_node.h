// ClusterNode: what makes a tokimq-broker one member of a cluster (docs/cluster.md).
//
// Owns the etcd client, the broker's Membership (registration under a lease), the ClusterView
// (members and topics, watched) and the TopicCatalog. Installed as the Broker's request
// interceptor, it answers:
//   - CreateTopic / UpdateTopic / DeleteTopic: one etcd transaction each (cluster/topic_catalog.h),
//     validated by the broker's topic rules; placement default: every live broker, the topic's
//     queue count on each. The change is applied locally at once when this broker hosts the
//     topic, and by every other broker from its watch.
//   - ListTopics: the cluster's topics (with placement). DescribeTopic of a topic hosted
//     elsewhere: its settings and placement (no queue offsets: they live on the hosts).
//   - Route, ClusterStatus: from the view, without an etcd round trip (status also lists every
//     group's replicas: one etcd range read).
//   - GroupStatus: this replica's role, term and (leader) its followers' lag.
//   - CreateGroup / UpdateGroup: one etcd transaction each, applied by every broker
//     (broker/src/cluster_groups.h).
//   - CreateUser / DeleteUser / GrantAcl / RevokeAcl: one etcd transaction each, mirrored into
//     every broker's auth store (broker/src/cluster_auth.h).
//   - Recall of a handle in the routing clients' "<broker>|<handle>" form: this broker's own
//     name is stripped and the recall served here; another broker's name is refused with
//     FAILED_PRECONDITION naming that broker and its address.
// Broker groups (issue 20): each broker name is a group of replicas (--broker-id); the group's
// leader is elected through etcd (GroupElection) and its record is the broker key routes read.
// Every other request (send, receive, ack, stats, ...) is the broker's own: data stays per
// broker (its CommitLog, timer store and consumer-group state).
//
// Local topics follow the cluster: a topic placed on this broker is created / updated in its
// MetadataStore with the placement's queue count; a local topic that the cluster does not have
// (deleted, or not placed here) is deleted locally — except when a snapshot of etcd (first read,
// re-sync) has no topic at all, which looks like a wiped or wrong etcd rather than an intent
// (logged, nothing deleted; a watched delete of the last topic is applied).
//
// Thread-safety: Intercept from any number of threads. Lifetime: Start once after the server
// listens (the advertised port must be known); Stop before the Broker closes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "broker/cluster_options.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {
class ClusterView;
class EtcdClient;
class TopicCatalog;
}  // namespace tokimq::cluster

namespace tokimq::broker {

class Broker;
class ClusterAuth;
class ClusterGroups;
class GroupElection;

class ClusterNode {
 public:
  // kInvalidArgument for a missing or invalid broker name, no etcd endpoint. Starts the watch
  // (which retries in the background while etcd is unreachable) and installs the interceptor
  // on `broker`, which must outlive the node.
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Create(Broker* broker,
                                                             ClusterOptions options);
  ~ClusterNode();

  // Registers this broker with its native address `advertise` (host:port) and gRPC address
  // (host:port, "" : none) and starts the keepalive thread. Never fails for etcd's sake: etcd
  // unreachable is logged and registration retried every second in the background. A name
  // held by another address may be this broker's own record from before a crash (restart on
  // another port), which lapses within the lease TTL: attempts go on, and on_conflict runs (on
  // the keepalive thread) once the name has stayed taken for TTL + 2 s — another live broker
  // has it; the caller then stops the broker.
  absl::Status Start(std::string advertise, std::string advertise_grpc,
                     std::function<void(const absl::Status&)> on_conflict);
  // Clean leave: revokes the lease (the broker leaves every route at once) and stops the watch.
  void Stop();

  bool Intercept(const proto::Request& req, proto::Response* resp);

  const ClusterOptions& options() const { return options_; }
  bool registered() const;

 private:
  ClusterNode(Broker* broker, ClusterOptions options);
  absl::Status CreateTopic(const proto::CreateTopicRequest& req, proto::Response* resp);
  absl::Status UpdateTopic(const proto::UpdateTopicRequest& req, proto::Response* resp);
  absl::Status DeleteTopic(const std::string& name);
  void ListTopics(proto::Response* resp);
  // true when answered (topic not hosted here but known to the cluster).
  bool DescribeRemote(const std::string& name, proto::Response* resp);
  void Status(proto::ClusterStatusResponse* out);
  void GroupStatus(proto::GroupStatusResponse* out);
  // A Recall naming a broker ("<broker>|<handle>"); false for a plain handle (the broker's).
  bool RouteRecall(const proto::Request& req, proto::Response* resp);
  // Brings the local MetadataStore in line with the cluster's topics (see class comment).
  void Reconcile(const std::map<std::string, proto::TopicConfig>& topics, bool snapshot);
  // Creates or updates the local copy of one cluster topic hosted here; deletes it when not.
  void ApplyLocal(const proto::TopicConfig& topic);

  Broker* broker_;
  ClusterOptions options_;
  std::unique_ptr<cluster::EtcdClient> etcd_;
  std::unique_ptr<cluster::ClusterView> view_;
  std::unique_ptr<cluster::TopicCatalog> catalog_;
  std::unique_ptr<GroupElection> group_;  // replica record + leader election
  std::unique_ptr<ClusterGroups> groups_;  // consumer-group settings (broker/src/cluster_groups.h)
  std::unique_ptr<ClusterAuth> auth_;      // users and ACL rules (broker/src/cluster_auth.h)
  std::mutex apply_mu_;  // serialises local topic changes (watch thread vs. request threads)
};

}  // namespace tokimq::broker
