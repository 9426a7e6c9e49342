// The properties section of a sent message, built straight from its Send entry in record
// encoding (Message::encoded_properties), without a std::map: the send path's share of
// issue 21 item 1 (docs/performance.md "Round 3"; the map and its re-encoding cost ~1.6k
// instructions per send by callgrind). The stored bytes are those the map gave
// (docs/formats/commitlog.md; tests/broker/send_properties_test.cc).
//
// Pure function of its arguments; thread-safe.
#pragma once

#include <string>

#include "proto/tokimq.pb.h"

namespace tokimq::broker {

// Writes to *out (replacing it) the properties section of a message sent as entry `e`: the
// entry's properties, then KEYS = e.key() and TAGS = e.tag() when not empty, MSG_GROUP =
// *message_group when given (FIFO topics), and UNIQ_KEY = message_id; a later one of these
// replaces an entry property of the same name (ValidateSendEntry refuses the reserved ones
// before this). Byte for byte what record::Encode wrote for the std::map the broker built from
// the same fields in that order (keys ascending and unique).
void EncodeSendProperties(const proto::SendEntry& e, const std::string* message_group,
                          const std::string& message_id, std::string* out);

}  // namespace tokimq::broker
