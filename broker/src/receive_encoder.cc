#include "receive_encoder.h"

#include <cstring>

#include "proto/framing.h"

namespace tokimq::broker {
namespace {

// Protobuf wire format (protobuf.dev/programming-guides/encoding): tag = field << 3 | type.
constexpr uint32_t kVarint = 0, kLen = 2;
constexpr uint32_t Tag(uint32_t field, uint32_t type) { return field << 3 | type; }

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}
// Field tags here are all below 16: one byte each.
size_t StringFieldSize(std::string_view s) {
  return s.empty() ? 0 : 1 + VarintSize(s.size()) + s.size();
}
// int32 and int64 are written as the 64-bit two's complement (a negative int32 takes 10 bytes).
size_t IntFieldSize(int64_t v) { return v == 0 ? 0 : 1 + VarintSize(static_cast<uint64_t>(v)); }
char* PutString(char* p, uint32_t field, std::string_view s) {
  if (s.empty()) return p;
  *p++ = static_cast<char>(Tag(field, kLen));
  p = PutVarint(p, s.size());
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
char* PutInt(char* p, uint32_t field, int64_t v) {
  if (v == 0) return p;
  *p++ = static_cast<char>(Tag(field, kVarint));
  return PutVarint(p, static_cast<uint64_t>(v));
}

char* PutReceived(char* p, const ReceivedFields& f) {
  p = PutString(p, 1, f.message_id);
  p = PutString(p, 2, f.topic);
  p = PutInt(p, 3, f.queue_id);
  p = PutInt(p, 4, f.queue_offset);
  p = PutString(p, 5, f.body);
  p = PutString(p, 6, f.key);
  p = PutString(p, 7, f.tag);
  p = PutInt(p, 9, f.born_ms);
  p = PutString(p, 10, f.receipt_handle);
  p = PutInt(p, 11, f.delivery_attempt);
  p = PutInt(p, 12, f.deliver_ms);
  p = PutInt(p, 13, f.invisible_until_ms);
  p = PutString(p, 14, f.properties_encoded);
  return p;
}

constexpr uint32_t kResponseId = 1;        // Response.id
constexpr uint32_t kResponseReceive = 18;  // Response.receive (two-byte tag)
constexpr uint32_t kReceiveMessages = 1;   // ReceiveResponse.messages

}  // namespace

size_t ReceivedMessageSize(const ReceivedFields& f) {
  return StringFieldSize(f.message_id) + StringFieldSize(f.topic) + IntFieldSize(f.queue_id) +
         IntFieldSize(f.queue_offset) + StringFieldSize(f.body) + StringFieldSize(f.key) +
         StringFieldSize(f.tag) + IntFieldSize(f.born_ms) + StringFieldSize(f.receipt_handle) +
         IntFieldSize(f.delivery_attempt) + IntFieldSize(f.deliver_ms) +
         IntFieldSize(f.invisible_until_ms) + StringFieldSize(f.properties_encoded);
}

std::string EncodeReceiveFrame(uint64_t id, const std::vector<ReceivedFields>& messages,
                               std::string_view tail) {
  std::vector<size_t> sizes;
  sizes.reserve(messages.size());
  size_t receive = 0;  // ReceiveResponse body
  for (const ReceivedFields& f : messages) {
    sizes.push_back(ReceivedMessageSize(f));
    receive += 1 + VarintSize(sizes.back()) + sizes.back();
  }
  receive += tail.size();
  const uint32_t receive_tag = Tag(kResponseReceive, kLen);
  const size_t body = (id == 0 ? 0 : 1 + VarintSize(id)) + VarintSize(receive_tag) +
                      VarintSize(receive) + receive;
  std::string out(wire::kFrameHeaderBytes + body, '\0');
  wire::EncodeFrameHeader(out.data(), static_cast<uint32_t>(body));
  char* p = out.data() + wire::kFrameHeaderBytes;
  if (id != 0) {
    *p++ = static_cast<char>(Tag(kResponseId, kVarint));
    p = PutVarint(p, id);
  }
  p = PutVarint(p, receive_tag);
  p = PutVarint(p, receive);
  for (size_t i = 0; i < messages.size(); ++i) {
    *p++ = static_cast<char>(Tag(kReceiveMessages, kLen));
    p = PutVarint(p, sizes[i]);
    p = PutReceived(p, messages[i]);
  }
  if (!tail.empty()) {
    std::memcpy(p, tail.data(), tail.size());
    p += tail.size();
  }
  if (p != out.data() + out.size()) return std::string();  // a sizing bug: never sent
  return out;
}

}  // namespace tokimq::broker
