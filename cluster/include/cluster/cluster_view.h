// ClusterView: one broker's (or tool's) picture of its cluster, kept from etcd by a prefix
// watch on /tokimq/<cluster>/: the live members (BrokerRecord under their leases) and every
// topic with its placement. Routes are computed from it, so any broker answers a route
// request without an etcd round trip, and keeps answering from the last view while etcd is
// down (docs/cluster.md "Failure behaviour").
//
// on_topics (optional) runs on the watch thread after each change of the topic set, with the
// full set of topics after the change (the receiver reconciles; simpler and safe after a
// re-sync than applying deltas) and whether it came from a snapshot (a first read or a
// re-sync after a break) rather than from watched changes. Values that do not decode are logged and skipped.
// Thread-safety: every accessor from any thread (one mutex). Lifetime: Start after
// construction; Stop (or the destructor) before the EtcdClient goes.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/etcd_client.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {

class ClusterView {
 public:
  using TopicsListener =
      std::function<void(const std::map<std::string, proto::TopicConfig>&, bool snapshot)>;
  ClusterView(EtcdClient* etcd, std::string cluster, TopicsListener on_topics = nullptr);
  ~ClusterView();

  void Start();
  void Stop();
  // True once the first snapshot arrived.
  bool loaded() const;
  // Bounded real-time wait for the first snapshot; false after timeout_ms.
  bool WaitLoaded(int64_t timeout_ms) const;

  const std::string& cluster() const { return cluster_; }
  std::map<std::string, proto::BrokerRecord> Members() const;
  std::optional<proto::TopicConfig> Topic(const std::string& name) const;
  std::map<std::string, proto::TopicConfig> Topics() const;
  int64_t revision() const;

  // The route of `topic`: its settings and, per broker of the placement, the address (when
  // live) and queue count. kNotFound for a topic the cluster does not have; kUnavailable before
  // the first read of etcd succeeded (nothing is known yet).
  absl::StatusOr<proto::RouteResponse> Route(const std::string& topic) const;

 private:
  void Apply(const WatchBatch& batch);

  EtcdClient* etcd_;
  const std::string cluster_;
  TopicsListener on_topics_;
  mutable std::mutex mu_;
  mutable std::condition_variable loaded_cv_;
  bool loaded_ = false;                                // mu_
  int64_t revision_ = 0;                               // mu_
  std::map<std::string, proto::BrokerRecord> members_;  // mu_
  std::map<std::string, proto::TopicConfig> topics_;   // mu_
  std::unique_ptr<PrefixWatcher> watcher_;
};

}  // namespace tokimq::cluster
