// LeaderElection: one replica's part in electing the leader of its broker group through etcd
// (issue 20 item 4, docs/cluster.md "Broker groups", "Election and fencing").
//
// The group's leader key is /tokimq/<cluster>/brokers/<group name> (the key routes already read,
// so every route names the leader). A replica campaigns with one etcd transaction "if the key
// does not exist, put my BrokerRecord under my lease"; the winner's term is the etcd revision of
// that put (the key's mod_revision): strictly greater than every earlier term of every group,
// never reused, held durably by etcd. A record with this replica's own address is its own from
// before a restart: replaced by a compare-and-swap on its mod_revision, which is a new term too;
// or, when may_campaign() defers to another replica, deleted by the same compare, so that replica
// campaigns at once instead of after that record's lease runs out (an etcd restart renews every
// lease to its full TTL, and a deposed leader's revoke fails while etcd is down).
//
// A leader keeps its lease alive (a keepalive every ttl/3) and gives up (on_lost) when
//   - the key disappears or names another record (lease expired at etcd, operator delete), or
//   - etcd answers that the lease is gone, or
//   - no keepalive succeeded for long enough that etcd may have expired it (LeaseFence): it
//     stops before any successor can be elected, even while cut off from etcd.
// Other replicas watch the key and follow whoever holds it (on_leader, once per term); when
// the key is absent they campaign, each time may_campaign() allows (the broker defers to a
// live peer whose CommitLog is longer, so the most complete replica wins).
//
// Callbacks run on the election thread, one at a time, in term order; they must not call back
// into this object. Errors: etcd unreachable is retried every retry_ms (logged once per
// episode). Thread-safety: accessors from any thread. Lifetime: the EtcdClient outlives this;
// Stop (or the destructor) joins the thread; Stop(resign = true) deletes the key when leading
// (clean shutdown: a successor is elected at once instead of after the TTL).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cluster/etcd_client.h"
#include "cluster/lease_fence.h"
#include "common/clock.h"
#include "proto/tokimq.pb.h"

namespace tokimq::cluster {

struct ElectionOptions {
  std::string cluster;
  proto::BrokerRecord self;  // name (the group), address and broker_id are required
  int64_t ttl_s = 10;        // the leader lease; routes follow a dead leader within it
  int64_t retry_ms = 1'000;  // pause between attempts while etcd is unreachable
  // How long before the lease could expire a cut-off leader steps down (LeaseFence). Raised to
  // the EtcdClient's timeout_ms + 200: a keepalive that hangs until its timeout still ends
  // before the margin is used up. Give the election a client with a timeout well under ttl.
  int64_t fence_margin_ms = 500;
  Clock* clock = nullptr;  // monotonic enough for the fence; nullptr: SystemClock
};

struct ElectionCallbacks {
  std::function<void(int64_t term)> on_elected;  // this replica leads from `term` on
  // Another replica leads `term` (also sent once after this replica lost its own term).
  std::function<void(int64_t term, const proto::BrokerRecord& leader)> on_leader;
  // This replica led `term` and may no longer act as its leader (see class comment).
  std::function<void(int64_t term, const std::string& why)> on_lost;
  // Asked before each campaign; false defers it to the next round (100 ms later).
  std::function<bool()> may_campaign;
  // While false this replica neither follows nor campaigns (it is not a registered member of
  // its group yet: a replica that is not counted must not acknowledge a leader's writes).
  std::function<bool()> ready;
};

class LeaderElection {
 public:
  LeaderElection(EtcdClient* etcd, ElectionOptions options, ElectionCallbacks callbacks);
  ~LeaderElection();

  void Start();
  void Stop(bool resign);

  bool leading() const { return leading_term_.load() != 0; }
  int64_t leading_term() const { return leading_term_.load(); }  // 0: not leading
  // The term and record of the leader this replica last saw (its own when leading); 0: none.
  int64_t known_term() const;
  std::optional<proto::BrokerRecord> known_leader() const;
  // True while this replica leads and its lease fence holds (LeaseFence::Valid now): the write
  // path checks it on every write, so a leader that was paused or cut off past its fence
  // refuses writes even before the election thread notices. Any thread; one clock read.
  bool LeaseValidNow() const { return leading() && NowMs() < fence_until_ms_.load(); }
  bool etcd_reachable() const { return etcd_reachable_.load(); }
  int64_t elections_won() const { return elections_won_.load(); }

 private:
  struct Observed {  // the leader key as the watch last delivered it
    bool loaded = false;
    bool present = false;
    KeyValue kv;
    proto::BrokerRecord rec;
  };
  void Loop();
  void OnWatch(const WatchBatch& batch);
  // One step: keepalive / fence check while leading, follow or campaign otherwise. Returns the
  // pause before the next step, in ms.
  int64_t Step();
  int64_t StepLeading(const Observed& seen);
  int64_t StepFollowing(const Observed& seen);
  // One campaign; `stale` is this replica's own record from before a restart (CAS-replaced).
  void Campaign(const std::optional<KeyValue>& stale);
  // Deletes this replica's own record from before a restart (`stale`) if the key still holds
  // that revision, for a replica that defers to another one.
  void Release(const KeyValue& stale);
  void Lose(const std::string& why);
  void Follow(int64_t term, const proto::BrokerRecord& leader);
  int64_t NowMs() const { return clock_->NowMs(); }

  EtcdClient* etcd_;
  ElectionOptions options_;
  ElectionCallbacks callbacks_;
  Clock* clock_;
  const std::string key_;
  LeaseFence fence_;               // election thread
  int64_t lease_ = 0;              // election thread: the lease of the held key
  int64_t next_keepalive_ms_ = 0;  // election thread
  bool warned_ = false;            // election thread
  std::atomic<int64_t> leading_term_{0};
  std::atomic<int64_t> fence_until_ms_{0};  // fence_.valid_until_ms(), for LeaseValidNow
  std::atomic<bool> etcd_reachable_{false};
  std::atomic<int64_t> elections_won_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                         // mu_
  bool wake_ = false;                         // mu_: the watch delivered something
  Observed observed_;                         // mu_
  int64_t known_term_ = 0;                    // mu_
  std::optional<proto::BrokerRecord> known_;  // mu_
  std::unique_ptr<PrefixWatcher> watcher_;
  std::thread thread_;
};

}  // namespace tokimq::cluster
