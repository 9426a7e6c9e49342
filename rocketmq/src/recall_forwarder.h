// RecallForwarder: sends a native Recall to another broker of the cluster on behalf of a
// RocketMQ client (issue 19; docs/cluster.md "gRPC routing", docs/rocketmq-compat.md
// "Clusters"). The official clients send RecallMessage to their access point, not to the broker
// that stored the message (the Node.js client 1.0.8 calls it on `this.endpoints`), so in a
// cluster the broker that gets it forwards it to the broker its recall handle names.
//
// The forwarded request is authenticated as the RocketMQ caller itself: the connection to the
// owner proves the caller's secret key, which this broker holds because a cluster's users are
// the same on every broker (etcd, docs/security.md "Clusters"); "" (auth off): no credentials.
// The owner then authorizes it with its own table (pub on the topic the recall names). One
// plaintext native connection per (owner address, user) is kept and reused; a broken one is
// replaced on the next call; at most kMaxConnections are kept (the oldest is closed first).
//
// Errors: the owner's answer as a native response (its status kept); transport failures
// (owner unreachable, timeout after 5 s) as a native status UNAVAILABLE / DEADLINE_EXCEEDED
// naming the owner. Thread-safety: Forward from any thread; calls to different owners run in
// parallel, one connection serves one call at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "proto/tokimq.pb.h"

namespace tokimq::client {
class Connection;
}

namespace tokimq::rocketmq {

class RecallForwarder {
 public:
  static constexpr size_t kMaxConnections = 64;
  static constexpr int64_t kTimeoutMs = 5'000;

  RecallForwarder();
  ~RecallForwarder();

  // `owner`: the broker name (for error texts); `address`: its native host:port.
  proto::Response Forward(const std::string& owner, const std::string& address,
                          const std::string& access_key, const std::string& secret_key,
                          const proto::Request& req);

 private:
  struct Slot {
    std::mutex mu;  // one call at a time on `conn`
    std::unique_ptr<client::Connection> conn;
    uint64_t last_used = 0;
  };
  std::shared_ptr<Slot> SlotFor(const std::string& address, const std::string& access_key);

  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Slot>> slots_;  // mu_
  uint64_t uses_ = 0;                                                          // mu_
};

}  // namespace tokimq::rocketmq
