// CheckStreams: the Telemetry streams of RocketMQ producers, by the topics their Settings
// publish to, so that a transaction check-back of the broker reaches a live producer of the
// half's topic as a RecoverOrphanedTransactionCommand (docs/rocketmq-compat.md
// "Transactions"). Offer picks the streams of the topic in turn (round robin).
//
// Thread-safety: all methods may be called from any thread. Offer writes to a stream while
// holding the registry lock, so Unregister (called before a Telemetry RPC returns) waits for a
// write in progress; writes to one stream are serialised by the stream's own write function.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "apache/rocketmq/v2/service.pb.h"

namespace tokimq::rocketmq {

class CheckStreams {
 public:
  // Writes one command to the stream; false when the stream is gone.
  using Writer = std::function<bool(const apache::rocketmq::v2::TelemetryCommand&)>;

  // Returns a stream id for Update/Unregister.
  uint64_t Register(Writer writer);
  void SetTopics(uint64_t id, std::set<std::string> topics);
  void Unregister(uint64_t id);
  // Writes `cmd` to one live stream publishing `topic`; false when there is none.
  bool Offer(const std::string& topic, const apache::rocketmq::v2::TelemetryCommand& cmd);

 private:
  struct Stream {
    Writer writer;
    std::set<std::string> topics;
  };
  std::mutex mu_;
  uint64_t next_id_ = 1;                 // mu_
  uint64_t turn_ = 0;                    // mu_: round robin
  std::map<uint64_t, Stream> streams_;   // mu_
};

}  // namespace tokimq::rocketmq
