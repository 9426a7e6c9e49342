// Framing of the native protocol: every frame is a 4-byte big-endian length followed by that
// many bytes of one serialized protobuf message (Request or Response, proto/tokimq.proto).
//
// The length is checked against the frame limit BEFORE anything is allocated for the body, so a
// peer announcing 4 GiB costs nothing. Pure functions, thread-safe. See docs/protocol.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace google::protobuf {
class MessageLite;
}

namespace tokimq::wire {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 4;
inline constexpr uint32_t kDefaultMaxFrameBytes = 16u << 20;  // 16 MiB of body

// Writes `len` big-endian into dst[0..3].
void EncodeFrameHeader(char* dst, uint32_t len);
// Reads the big-endian length from hdr[0..3] and checks it: kResourceExhausted (with the length
// and the limit in the message) if len > max_frame_bytes.
absl::StatusOr<uint32_t> DecodeFrameHeader(const char* hdr, uint32_t max_frame_bytes);

// Header + serialized message. kResourceExhausted if the message exceeds the limit,
// kInternal if serialization fails.
absl::StatusOr<std::string> EncodeFrame(const google::protobuf::MessageLite& msg,
                                        uint32_t max_frame_bytes = kDefaultMaxFrameBytes);
// Parses a frame body (without header). kInvalidArgument if the bytes are not a valid message.
absl::Status DecodeFrameBody(std::string_view body, google::protobuf::MessageLite* msg);

}  // namespace tokimq::wire
