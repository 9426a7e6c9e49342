// ClusterAuth: users and ACL rules of a broker in a cluster (issue 19 item 3; docs/security.md
// "Clusters", docs/cluster.md "etcd keys"). Owned by the ClusterNode.
//
// CreateUser / DeleteUser / GrantAcl / RevokeAcl (`tokimq user ...`, `tokimq acl ...`, through
// any broker) become one etcd transaction each (cluster/auth_catalog.h), validated with the
// broker's own rules (broker/auth/acl.h). Every broker watches the cluster's users and rules
// and mirrors them into its local AuthStore (AuthStore::ReplaceAll), which keeps serving every
// authentication and permission check locally: etcd is never on the request path, and when
// etcd is down the last mirrored set holds (user / ACL admin then answers UNAVAILABLE). The
// answering broker replies once its own watch has applied the change (bounded by 5 s; past
// that the change is committed in etcd and the reply is OK with a warning logged), so the
// caller's next request on that broker already sees it; the others follow within their watch
// delay (milliseconds on a healthy etcd).
//
// A snapshot of etcd without any user (a new cluster, or wiped etcd data) is not mirrored: the
// broker keeps its local users and copies each of them, with its rules, into etcd (one "if
// absent" transaction per user), from where every broker mirrors them. This is how a broker's
// --auth-init-user (created locally at start when the broker has no user) and the users of a
// broker that was a single node before seed a cluster. ListUsers / ListAcl read the local
// mirror.
//
// Thread-safety: Intercept from any number of threads; the watch thread mirrors changes.
// Lifetime: Start once; Stop before the Broker closes; the EtcdClient outlives it.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {
class EtcdClient;
class AuthCatalog;
struct AuthState;
}  // namespace tokimq::cluster

namespace tokimq::broker {

class Broker;

class ClusterAuth {
 public:
  ClusterAuth(Broker* broker, cluster::EtcdClient* etcd, std::string cluster);
  ~ClusterAuth();

  // Starts the watch of the cluster's users and rules.
  void Start();
  void Stop();
  // Answers CreateUser, DeleteUser, GrantAcl, RevokeAcl; false for every other request.
  bool Intercept(const proto::Request& req, proto::Response* resp);

 private:
  absl::Status CreateUser(const proto::CreateUserRequest& req);
  absl::Status Grant(const proto::AclRuleInfo& req);
  absl::Status Revoke(const proto::RevokeAclRequest& req);
  // OK once the watch has applied `revision` (see class comment); else the write's error.
  absl::Status Applied(const absl::StatusOr<int64_t>& revision, const std::string& what);
  void OnState(const cluster::AuthState& state, bool snapshot);
  // The empty-cluster case of the class comment.
  void CopyLocalUsersToCluster();

  Broker* broker_;
  std::string cluster_;
  std::unique_ptr<cluster::AuthCatalog> catalog_;
};

}  // namespace tokimq::broker
