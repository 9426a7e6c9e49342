#include "proto/framing.h"

#include <google/protobuf/message_lite.h>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace tokimq::wire {

void EncodeFrameHeader(char* dst, uint32_t len) {
  dst[0] = static_cast<char>(len >> 24);
  dst[1] = static_cast<char>(len >> 16);
  dst[2] = static_cast<char>(len >> 8);
  dst[3] = static_cast<char>(len);
}

absl::StatusOr<uint32_t> DecodeFrameHeader(const char* hdr, uint32_t max_frame_bytes) {
  const auto* u = reinterpret_cast<const unsigned char*>(hdr);
  uint32_t len = (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) |
                 uint32_t{u[3]};
  if (len > max_frame_bytes) {
    return absl::ResourceExhaustedError(
        fmt::format("frame of {} bytes exceeds the limit of {} bytes", len, max_frame_bytes));
  }
  return len;
}

absl::StatusOr<std::string> EncodeFrame(const google::protobuf::MessageLite& msg,
                                        uint32_t max_frame_bytes) {
  size_t size = msg.ByteSizeLong();
  if (size > max_frame_bytes) {
    return absl::ResourceExhaustedError(
        fmt::format("message of {} bytes exceeds the frame limit of {} bytes", size,
                    max_frame_bytes));
  }
  std::string out(kFrameHeaderBytes + size, '\0');
  EncodeFrameHeader(out.data(), static_cast<uint32_t>(size));
  if (!msg.SerializeToArray(out.data() + kFrameHeaderBytes, static_cast<int>(size))) {
    return absl::InternalError("protobuf serialization failed");
  }
  return out;
}

absl::Status DecodeFrameBody(std::string_view body, google::protobuf::MessageLite* msg) {
  if (body.size() > static_cast<size_t>(INT32_MAX) ||
      !msg->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return absl::InvalidArgumentError(
        fmt::format("malformed frame: {} bytes are not a valid message", body.size()));
  }
  return absl::OkStatus();
}

}  // namespace tokimq::wire
