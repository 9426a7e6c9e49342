// Send validation: the checks one entry of a native Send request must pass before anything of
// the request is stored (docs/protocol.md "Send"). Both APIs come through it (the gRPC
// SendMessage calls Broker::Handle).
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "broker/metadata_store.h"
#include "commitlog/message.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {

// One validated entry of a Send request: the message to store and its deliver time (ms since
// the epoch; <= the request's time: store now).
struct PreparedSend {
  // Properties: msg.encoded_properties (send_properties.h), or msg.properties for a
  // transactional entry (the transaction service edits the map).
  Message msg;
  int64_t deliver_ms;
  std::string message_id;      // the UNIQ_KEY given at send (also in msg's properties)
  bool transactional = false;  // store as a half message (broker/src/transaction/)
  int64_t immunity_ms = 0;     // transactional: check immunity, ms
};

// The message group of `e`: its message_group, else its key (FIFO topics order by it).
const std::string& MessageGroupOf(const proto::SendEntry& e);

// Checks entry `e` for `topic` at time `now_ms`: body at most `max_message_size` bytes; delay
// >= 0 and within the topic's max delay (deliver_at in the past means now); no reserved
// property (MSG_GROUP, the timer store's TIMER_DELETE_OF and TIMER_SRC_OFFSET); key, tag and
// properties within common/message_limits.h; FIFO topics: a message group (or key) of at most
// kMaxMessageGroupBytes without control characters; other topics: no message group.
// On success *deliver_ms is the entry's deliver time. Errors: kInvalidArgument naming the rule.
absl::Status ValidateSendEntry(const proto::SendEntry& e, const TopicConfig& topic,
                               uint32_t max_message_size, int64_t now_ms, int64_t* deliver_ms);

}  // namespace tokimq::broker
