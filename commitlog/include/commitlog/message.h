// Message: the unit stored in the CommitLog, and the property names the broker and the timer
// store agree on.
//
// A Message is a plain value type; it owns its bytes. Units: *_ms are milliseconds since the
// Unix epoch; offsets are bytes (physical offset) or entry counts (queue offset).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/message_limits.h"  // kMaxMessageGroupBytes and the other limits
#include "common/offsets.h"
#include "common/property_keys.h"

namespace tokimq {

// Record flags (persisted: values are never renumbered).
enum MessageFlag : uint32_t {
  kFlagNone = 0,
  // Set by MessageStore::Put/PutBatch: the record has a ConsumeQueue entry at its queue_offset,
  // and recovery re-dispatches it. CommitLog::Append (direct) clears it.
  kFlagIndexed = 1u << 0,
};

struct Message {
  std::string topic;
  int32_t queue_id = 0;
  QueueOffset queue_offset = QueueOffset::kNone();           // assigned by MessageStore::Put
  PhysicalOffset physical_offset = PhysicalOffset::kNone();  // assigned by CommitLog::Append
  int64_t born_ms = 0;                                       // set by the producer side
  int64_t store_ms = 0;  // assigned by CommitLog::Append from its Clock
  uint32_t flags = kFlagNone;
  std::map<std::string, std::string> properties;
  // The properties already in record encoding, for a producer that has them as bytes and would
  // otherwise build `properties` only to have it re-encoded (the timer's delivered copies).
  // Shape: exactly the properties section of a CommitLog record (docs/formats/commitlog.md):
  // repeated { u32 key length, key, u32 value length, value }, keys strictly ascending in
  // byte order (as std::map orders std::string), lengths in bytes, little-endian. Empty means
  // "not set": `properties` is then used. When set, `properties` must be empty (CommitLog
  // append refuses a message with both, kInvalidArgument); record::EncodedSize/EncodeTo copy
  // the bytes verbatim, so the record is the one `properties` holding the same pairs would
  // give. Set only by the producer of a Message (timerstore's DeliveredCopy); decoders
  // (record::Decode, MessageFromView, every read) never set it and clear it. Readers on the
  // put path use record::FindProperty on it when set. Thread-safety: as the rest of Message.
  std::string encoded_properties;
  std::string body;

  // Bytes this message occupies as a CommitLog record (see docs/formats/commitlog.md).
  size_t EncodedSize() const;
};

// Property names (prop::kKeys, ...): common/property_keys.h.

}  // namespace tokimq
