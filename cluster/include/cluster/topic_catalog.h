// TopicCatalog: topic create / update / delete in a cluster, each one etcd transaction on
// /tokimq/<cluster>/topics/<name> (create: "if absent"; update: compare-and-swap on the key's
// mod revision, retried on a race; delete: "if present"). Every broker's ClusterView sees the
// change through its watch and applies it to its local stores. Validation of the settings is
// the caller's (the broker's topic rules, broker/metadata_store.h).
//
// Errors: kAlreadyExists (create), kNotFound (update, delete), kAborted after 8 lost races,
// whatever the update function returns, etcd's kUnavailable / kDeadlineExceeded.
// Thread-safety: every method from any thread. The EtcdClient must outlive it.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "cluster/etcd_client.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {

class TopicCatalog {
 public:
  TopicCatalog(EtcdClient* etcd, std::string cluster)
      : etcd_(etcd), cluster_(std::move(cluster)) {}

  // Returns the etcd revision of the change.
  absl::StatusOr<int64_t> Create(const proto::TopicConfig& topic);
  // Reads the topic, lets `change` modify it (an error from it is returned as is) and writes
  // it back if nobody changed it meanwhile; returns the topic as written.
  absl::StatusOr<proto::TopicConfig> Update(
      const std::string& name, const std::function<absl::Status(proto::TopicConfig*)>& change);
  absl::Status Delete(const std::string& name);

 private:
  EtcdClient* etcd_;
  std::string cluster_;
};

}  // namespace tokimq::cluster
