// AuthCatalog: the users and ACL rules of a cluster in etcd (issue 19 item 3; docs/cluster.md
// "etcd keys", docs/security.md "Clusters"):
//
//   /tokimq/<cluster>/users/<access key>             proto::ClusterUser (protobuf JSON)
//   /tokimq/<cluster>/acl/<access key>/<resource>    proto::AclRuleInfo (protobuf JSON)
//
// <resource> is the rule's resource text as the broker prints it (`topic:orders`, `group:g*`,
// `*`); access keys never contain '/', so the first '/' after the access key ends it. The
// secret key is stored as given, exactly what every broker's local auth store keeps (HMAC
// verification needs the secret itself): protect etcd (TLS, auth) as the data dirs are.
//
// Each change is one etcd transaction:
//   CreateUser  "if users/<ak> absent: put it, and delete acl/<ak>/*" (no stale rule can come
//               back with a re-created user); kAlreadyExists.
//   DeleteUser  "if users/<ak> has the create revision read: delete it and acl/<ak>/*";
//               kNotFound.
//   PutRule     "if users/<ak> has the create revision read: put acl/<ak>/<resource>" (adds or
//               replaces); kNotFound when the user does not exist; a user deleted (or re-created)
//               between the read and the write retries, up to 8 times, then kAborted.
//   DeleteRule  "if acl/<ak>/<resource> has the mod revision read: delete it"; kNotFound.
// Each returns the etcd revision of the change (the transaction's revision).
//
// Watch() keeps the full state (users and their rules) from one watch of the cluster prefix
// (one snapshot, then changes in revision order, so users and rules are never seen out of
// order; other keys of the cluster are ignored) and calls the listener on the watch thread
// with the state after each snapshot or change batch that touches users or rules. Rules whose
// user is absent are not part of the state. WaitApplied lets a request thread wait until the
// listener has seen its own change (read-your-writes on the answering broker).
//
// Errors: etcd's kUnavailable / kDeadlineExceeded on every write; a value that does not decode
// is logged and skipped by the watch (kDataLoss from DecodeValue).
// Thread-safety: every method from any thread. The EtcdClient must outlive it; Stop (or the
// destructor) before it goes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/etcd_client.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {

std::string UsersPrefix(const std::string& cluster);  // /tokimq/<c>/users/
std::string UserKey(const std::string& cluster, const std::string& access_key);
std::string AclPrefix(const std::string& cluster);  // /tokimq/<c>/acl/
std::string AclKey(const std::string& cluster, const std::string& access_key,
                   const std::string& resource);

// Users and their rules as etcd has them at `revision`.
struct AuthState {
  struct Entry {
    proto::ClusterUser user;
    std::vector<proto::AclRuleInfo> rules;  // sorted by resource text
  };
  std::map<std::string, Entry> users;  // by access key
  int64_t revision = 0;
};

class AuthCatalog {
 public:
  using Listener = std::function<void(const AuthState&, bool snapshot)>;
  AuthCatalog(EtcdClient* etcd, std::string cluster) : etcd_(etcd), cluster_(std::move(cluster)) {}
  ~AuthCatalog();

  absl::StatusOr<int64_t> CreateUser(const proto::ClusterUser& user);
  // CreateUser with the user's rules in the same transaction (a broker copying its local users
  // into an empty cluster: docs/security.md "Clusters").
  absl::StatusOr<int64_t> CreateUserWithRules(const proto::ClusterUser& user,
                                              const std::vector<proto::AclRuleInfo>& rules);
  absl::StatusOr<int64_t> DeleteUser(const std::string& access_key);
  absl::StatusOr<int64_t> PutRule(const proto::AclRuleInfo& rule);
  absl::StatusOr<int64_t> DeleteRule(const std::string& access_key, const std::string& resource);

  // Starts the watch (once); `listener` may be null.
  void Watch(Listener listener);
  void Stop();
  AuthState State() const;
  // Waits (real time, at most timeout_ms) until the listener has returned for a batch at or
  // past `revision`; true when it has.
  bool WaitApplied(int64_t revision, int64_t timeout_ms);

 private:
  void Apply(const WatchBatch& batch);
  // Applies one event to users_ / rules_ (mu_ held); true when it concerned users or rules.
  bool ApplyEventLocked(const WatchEvent& e);
  AuthState StateLocked() const;

  EtcdClient* etcd_;
  const std::string cluster_;
  Listener listener_;
  mutable std::mutex mu_;
  std::condition_variable applied_cv_;
  std::map<std::string, proto::ClusterUser> users_;                            // mu_
  std::map<std::string, std::map<std::string, proto::AclRuleInfo>> rules_;     // mu_: ak -> res
  int64_t revision_ = 0;          // mu_: of the state
  int64_t applied_revision_ = 0;  // mu_: the listener has returned for it
  std::unique_ptr<PrefixWatcher> watcher_;
};

}  // namespace tokimq::cluster
