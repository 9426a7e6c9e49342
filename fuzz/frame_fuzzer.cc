// Fuzz target: native protocol framing (proto/framing.h, docs/protocol.md).
//
// The input is a byte stream as a peer would send it: 4-byte big-endian length, body, repeated
// (at most 8 frames). Each body is parsed as a Request (what the broker reads) and as a
// Response (what the client reads).
// Properties: the header round-trips (EncodeFrameHeader/DecodeFrameHeader) and a length above
// the limit is refused; a body that parses re-frames with EncodeFrame to a frame whose header
// gives its body size and whose body parses to the same message (compared by deterministic
// serialization), which re-frames to the same bytes.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "proto/framing.h"
#include "proto/tokimq.pb.h"

namespace tokimq {
namespace {

// Maps are serialized in hash order unless asked otherwise.
std::string Deterministic(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream so(&out);
    google::protobuf::io::CodedOutputStream cos(&so);
    cos.SetSerializationDeterministic(true);
    FUZZ_CHECK(m.SerializeToCodedStream(&cos));
  }
  return out;
}

template <typename Msg>
void CheckBody(std::string_view body) {
  Msg msg;
  absl::Status s = wire::DecodeFrameBody(body, &msg);
  if (!s.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(s));
    return;
  }
  absl::StatusOr<std::string> frame = wire::EncodeFrame(msg);
  const size_t size = msg.ByteSizeLong();
  if (size > wire::kDefaultMaxFrameBytes) {
    FUZZ_CHECK(absl::IsResourceExhausted(frame.status()));
    return;
  }
  FUZZ_CHECK(frame.ok());
  FUZZ_CHECK(frame->size() == wire::kFrameHeaderBytes + size);
  absl::StatusOr<uint32_t> len = wire::DecodeFrameHeader(frame->data(), wire::kDefaultMaxFrameBytes);
  FUZZ_CHECK(len.ok() && *len == size);
  Msg back;
  FUZZ_CHECK(wire::DecodeFrameBody(std::string_view(*frame).substr(wire::kFrameHeaderBytes), &back).ok());
  const std::string det = Deterministic(msg);
  FUZZ_CHECK(Deterministic(back) == det);
  // Re-parsing our own deterministic bytes is a fixed point.
  Msg again;
  FUZZ_CHECK(again.ParseFromString(det));
  FUZZ_CHECK(Deterministic(again) == det);
}

}  // namespace
}  // namespace tokimq

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);  // one "invalid UTF-8" line per such input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq;
  std::string_view in = fuzz::AsView(data, size);
  for (int frames = 0; frames < 8 && in.size() >= wire::kFrameHeaderBytes; ++frames) {
    // Small limits come from the first header byte too, so both branches are reachable.
    const uint32_t limit = (static_cast<uint8_t>(in[0]) & 0x80) ? wire::kDefaultMaxFrameBytes : 1024;
    absl::StatusOr<uint32_t> len = wire::DecodeFrameHeader(in.data(), limit);
    const uint32_t raw = (uint32_t{static_cast<uint8_t>(in[0])} << 24) |
                         (uint32_t{static_cast<uint8_t>(in[1])} << 16) |
                         (uint32_t{static_cast<uint8_t>(in[2])} << 8) | static_cast<uint8_t>(in[3]);
    char hdr[wire::kFrameHeaderBytes];
    wire::EncodeFrameHeader(hdr, raw);
    FUZZ_CHECK(std::string_view(hdr, sizeof(hdr)) == in.substr(0, wire::kFrameHeaderBytes));
    if (!len.ok()) {
      FUZZ_CHECK(raw > limit && absl::IsResourceExhausted(len.status()));
      return 0;  // the server answers with an error and closes
    }
    FUZZ_CHECK(*len == raw);
    in.remove_prefix(wire::kFrameHeaderBytes);
    if (in.size() < *len) return 0;  // truncated frame: the connection ends
    std::string_view body = in.substr(0, *len);
    in.remove_prefix(*len);
    CheckBody<proto::Request>(body);
    CheckBody<proto::Response>(body);
  }
  return 0;
}
