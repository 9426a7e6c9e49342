// GroupCatalog: consumer-group settings of a cluster in etcd (issue 19 item 3; docs/cluster.md
// "etcd keys"): /tokimq/<cluster>/consumer_groups/<group> holds a proto::GroupConfig as protobuf
// JSON (today its delivery order, `tokimq group create|update --orderly`). Create is one etcd
// transaction "if absent put"; Update reads, lets the caller change the record and writes it
// back with a compare-and-swap on its mod revision (retried on a race, 8 times). There is no
// delete (the broker has no group delete request).
//
// Watch() keeps an in-memory copy from a watch on the prefix (snapshot, then changes; a re-read
// snapshot after any break) and calls the listener on the watch thread after each change with
// the full set of groups and whether it came from a snapshot; every broker applies it to its
// local GroupConfigStore, so receives read the order locally, never from etcd.
//
// The prefix is "consumer_groups/", not "groups/": a broker *group* (issue 20: a leader and its
// followers) is also called a group, and its keys must not be read as consumer groups.
//
// Errors: kAlreadyExists (Create), kNotFound (Update), kAborted after 8 lost races, whatever
// `change` returns, etcd's kUnavailable / kDeadlineExceeded; a value that does not decode is
// logged and skipped by the watch.
// Thread-safety: every method from any thread. The EtcdClient must outlive it; Stop (or the
// destructor) before it goes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "cluster/etcd_client.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {

std::string ConsumerGroupsPrefix(const std::string& cluster);  // /tokimq/<c>/consumer_groups/
std::string ConsumerGroupKey(const std::string& cluster, const std::string& group);

class GroupCatalog {
 public:
  using Listener =
      std::function<void(const std::map<std::string, proto::GroupConfig>&, bool snapshot)>;
  GroupCatalog(EtcdClient* etcd, std::string cluster)
      : etcd_(etcd), cluster_(std::move(cluster)) {}
  ~GroupCatalog();

  // Returns the etcd revision of the change.
  absl::StatusOr<int64_t> Create(const proto::GroupConfig& group);
  // Returns the group as written.
  absl::StatusOr<proto::GroupConfig> Update(
      const std::string& name, const std::function<absl::Status(proto::GroupConfig*)>& change);

  // Starts the watch (once); `on_groups` may be null.
  void Watch(Listener on_groups);
  void Stop();
  // The watched groups (empty before the first snapshot).
  std::map<std::string, proto::GroupConfig> Groups() const;

 private:
  void Apply(const WatchBatch& batch);

  EtcdClient* etcd_;
  const std::string cluster_;
  Listener on_groups_;
  mutable std::mutex mu_;
  std::map<std::string, proto::GroupConfig> groups_;  // mu_
  std::unique_ptr<PrefixWatcher> watcher_;
};

}  // namespace tokimq::cluster
