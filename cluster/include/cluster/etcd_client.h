// EtcdClient: a small C++ client of etcd's v3 gRPC API (KV, Lease, Watch), generated at build
// time from the .proto files of Debian's golang-etcd-server-dev (cluster/CMakeLists.txt).
//
// Endpoints: "host:port" list; every call goes to the current endpoint and, when that one is
// unreachable (UNAVAILABLE / DEADLINE_EXCEEDED), to the next ones in turn (one pass). Plain
// text only (etcd's --listen-client-urls http://...).
//
// Errors: kUnavailable when no endpoint answered (etcd down, partitioned), kDeadlineExceeded
// after options.timeout_ms, kNotFound for an unknown or expired lease, other etcd errors with
// etcd's text. Nothing here retries a write: the caller decides (Membership retries).
// Thread-safety: every method may be called from any thread (gRPC stubs are thread-safe).
// Lifetime: PrefixWatcher objects must be stopped (or destroyed) before the client.
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
#include <vector>

#include "absl/status/statusor.h"

namespace tokimq::cluster {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // host:port, at least one
  int64_t timeout_ms = 3'000;          // per call
};

// Splits "h1:p1,h2:p2" (spaces ignored). kInvalidArgument for an empty list or an item
// without a port.
absl::StatusOr<std::vector<std::string>> ParseEndpoints(const std::string& list);

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0: none
};

// One etcd transaction: if every compare holds, the puts and deletes of `success` run
// atomically; else `failure_gets` are read (to tell the caller what was there).
struct EtcdTxn {
  struct Compare {
    enum class Kind { kCreateRevisionEquals, kModRevisionEquals };
    std::string key;
    Kind kind = Kind::kCreateRevisionEquals;
    int64_t revision = 0;  // kCreateRevisionEquals with 0: "the key does not exist"
  };
  struct Put {
    std::string key, value;
    int64_t lease = 0;
  };
  std::vector<Compare> compares;
  std::vector<Put> puts;
  std::vector<std::string> deletes;
  std::vector<std::string> delete_prefixes;  // every key starting with each (no put may fall in one)
  std::vector<std::string> failure_gets;
};
struct EtcdTxnResult {
  bool succeeded = false;
  int64_t revision = 0;               // etcd's revision after the transaction
  std::vector<KeyValue> failure_kvs;  // the failure_gets that exist (when !succeeded)
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // the store revision the range was read at
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for kDelete: key and mod_revision only
};
// What a PrefixWatcher delivers: either a full snapshot of the prefix (snapshot = true; events
// are puts of every key, the receiver replaces its state), or incremental events.
struct WatchBatch {
  bool snapshot = false;
  int64_t revision = 0;
  std::vector<WatchEvent> events;
};

class PrefixWatcher;

class EtcdClient {
 public:
  // Starts connecting in the background, one thread per endpoint that keeps its channel
  // connecting while the client lives (a reconnection after an etcd restart completes within
  // ~100 ms of etcd answering, not at gRPC's 5 s backup poll); an etcd that is down shows as
  // kUnavailable on the first call. kInvalidArgument for no endpoint. The destructor joins
  // those threads (up to 100 ms).
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdOptions options);
  ~EtcdClient();

  // Returns the revision of the put.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key);
  // Every key starting with `prefix`, sorted by key.
  absl::StatusOr<RangeResult> RangePrefix(const std::string& prefix);
  // Number of keys deleted (0 or 1).
  absl::StatusOr<int64_t> Delete(const std::string& key);
  absl::StatusOr<EtcdTxnResult> Txn(const EtcdTxn& txn);

  // A lease of ttl_s seconds (etcd may grant more); returns its id.
  absl::StatusOr<int64_t> LeaseGrant(int64_t ttl_s);
  // One keepalive round; returns the lease's new TTL in seconds. kNotFound when the lease
  // expired or was revoked (its keys are gone).
  absl::StatusOr<int64_t> LeaseKeepAlive(int64_t lease);
  absl::Status LeaseRevoke(int64_t lease);

  // Starts a thread that delivers a snapshot of `prefix`, then its changes; after any break
  // (etcd restart, compaction, endpoint switch) it re-reads a snapshot and goes on, retrying
  // every retry_ms while etcd is unreachable. `on_batch` runs on that thread, never
  // concurrently with itself; it must not block for long.
  std::unique_ptr<PrefixWatcher> WatchPrefix(std::string prefix,
                                             std::function<void(const WatchBatch&)> on_batch,
                                             int64_t retry_ms = 1'000);

  const EtcdOptions& options() const { return options_; }

  struct Impl;

 private:
  explicit EtcdClient(EtcdOptions options);
  friend class PrefixWatcher;
  EtcdOptions options_;
  std::unique_ptr<Impl> impl_;
};

// See EtcdClient::WatchPrefix. Stop() (or the destructor) ends the thread and returns once
// on_batch no longer runs. Thread-safe.
class PrefixWatcher {
 public:
  ~PrefixWatcher();
  void Stop();
  // Snapshots delivered so far (1 after the first successful read; +1 per re-sync).
  int64_t snapshots() const { return snapshots_.load(); }

 private:
  friend class EtcdClient;
  PrefixWatcher(EtcdClient* client, std::string prefix,
                std::function<void(const WatchBatch&)> on_batch, int64_t retry_ms);
  void Loop();
  // One snapshot + watch session; returns when the stream breaks or Stop() is called.
  void Session();

  EtcdClient* client_;
  std::string prefix_;
  std::function<void(const WatchBatch&)> on_batch_;
  int64_t retry_ms_;
  std::atomic<int64_t> snapshots_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;       // mu_
  void* cancel_ = nullptr;  // mu_: the grpc::ClientContext of the open stream
  std::thread thread_;
};

}  // namespace tokimq::cluster
