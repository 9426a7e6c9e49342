// Receive responses encoded straight from stored records.
//
// Building a native Receive response as a proto::Response costs seven string copies per
// message into the arena and then the serialization (callgrind, `tokimq-bench --mode lease`:
// ~3.5k instructions per message, a quarter of the broker's receive + ack work). Here each
// message is written once, from the record's bytes, into the frame.
//
// The bytes are exactly what protobuf would write for the same proto::Response (fields in
// number order, proto3 defaults omitted, int32 negatives as 10-byte varints): a client cannot
// tell the two apart, and receive_encoder_test.cc compares them byte for byte. Only the form
// with ReceivedMessage.properties_encoded (ReceiveRequest.encoded_properties) is written here;
// the map form stays on the proto path. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokimq::broker {

// The fields of one proto::ReceivedMessage (proto/tokimq.proto), as views.
struct ReceivedFields {
  std::string_view message_id;          // 1
  std::string_view topic;               // 2
  int32_t queue_id = 0;                 // 3
  int64_t queue_offset = 0;             // 4
  std::string_view body;                // 5
  std::string_view key;                 // 6
  std::string_view tag;                 // 7
  int64_t born_ms = 0;                  // 9
  std::string_view receipt_handle;      // 10
  int32_t delivery_attempt = 0;         // 11
  int64_t deliver_ms = 0;               // 12
  int64_t invisible_until_ms = 0;       // 13
  std::string_view properties_encoded;  // 14
};

// Encoded size of one ReceivedMessage, in bytes.
size_t ReceivedMessageSize(const ReceivedFields& f);

// A whole frame (4-byte big-endian length + proto::Response{id, receive{messages}}) holding
// `messages` in order. Sizes are computed before anything is written: one allocation. Empty
// only on an internal sizing error (never expected; the caller then answers through the proto).
// `tail`: serialized ReceiveResponse fields written after the messages (the ack results of a
// receive that carried acks, field 2: protobuf reads concatenated fields as one message).
std::string EncodeReceiveFrame(uint64_t id, const std::vector<ReceivedFields>& messages,
                               std::string_view tail = {});

}  // namespace tokimq::broker
