// Membership: a broker's registration in its cluster, /tokimq/<cluster>/brokers/<name> in etcd
// under a lease of ttl_s seconds (default 10) that a background thread keeps alive (a
// keepalive every ttl_s / 3). A broker whose lease lapses (crash, partition, etcd lost it)
// disappears from every route; the thread registers it again as soon as etcd answers.
//
// One name, one broker: registration is an etcd transaction "create if absent". A record of
// the same name with the same advertised address is this broker's own from before a restart
// (no other process can listen on that address while this one does) and is replaced under the
// new lease; a record with another address is another broker's: kAlreadyExists.
//
// Errors (RegisterOnce): OK, kAlreadyExists (name taken), kUnavailable / kDeadlineExceeded
// (etcd unreachable). Thread-safety: every method from any thread. Lifetime: the EtcdClient
// must outlive the Membership; Stop (or the destructor) joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "cluster/etcd_client.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {

struct MembershipOptions {
  std::string cluster;
  proto::BrokerRecord self;  // name and address are required
  // The key registered; "": /tokimq/<cluster>/brokers/<name>. Cluster mode registers each
  // replica at ReplicaKey (keys.h) and leaves the brokers/ key to the election (issue 20).
  std::string key;
  int64_t ttl_s = 10;
  int64_t retry_ms = 1'000;  // between attempts while etcd is unreachable or the name taken
};

class Membership {
 public:
  Membership(EtcdClient* etcd, MembershipOptions options);
  ~Membership();

  // One registration attempt (see class comment). On OK the broker is registered under a
  // fresh lease, which Start's thread keeps alive.
  absl::Status RegisterOnce();
  // Starts the keepalive / re-registration thread. on_conflict runs on that thread each time
  // an attempt finds the name held by another broker (the thread keeps trying: that broker may
  // go away). Call once.
  void Start(std::function<void(const absl::Status&)> on_conflict);
  // Ends the thread. revoke: also revokes the lease, so the record disappears at once (clean
  // shutdown) instead of after the TTL. Idempotent.
  void Stop(bool revoke);

  bool registered() const { return registered_.load(); }
  bool etcd_reachable() const { return etcd_reachable_.load(); }
  int64_t lease() const { return lease_.load(); }
  int64_t registrations() const { return registrations_.load(); }
  const MembershipOptions& options() const { return options_; }

 private:
  void Loop(std::function<void(const absl::Status&)> on_conflict);
  // Waits up to ms (real time) or until Stop; false when stopping.
  bool WaitMs(int64_t ms);

  EtcdClient* etcd_;
  MembershipOptions options_;
  std::atomic<bool> registered_{false};
  std::atomic<bool> etcd_reachable_{false};
  std::atomic<int64_t> lease_{0};
  std::atomic<int64_t> registrations_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // mu_
  std::thread thread_;
};

}  // namespace tokimq::cluster
