#include "timerstore/recall_handle.h"

#include "commitlog/record.h"
#include "common/coding.h"
#include "common/crc32c.h"

namespace tokimq {
namespace {

constexpr uint8_t kHandleVersion = 1;
constexpr size_t kHandleBytes = 25;
constexpr char kHex[] = "0123456789abcdef";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

uint32_t RecallHandle::IdCrcOf(const Message& m) {
  if (!m.encoded_properties.empty()) {
    std::string_view id;
    if (record::FindProperty(m.encoded_properties, prop::kMessageId, &id) && !id.empty()) {
      return crc32c::Value(id);
    }
    return crc32c::Value(m.body);
  }
  auto it = m.properties.find(prop::kMessageId);
  if (it != m.properties.end() && !it->second.empty()) return crc32c::Value(it->second);
  return crc32c::Value(m.body);
}

std::string RecallHandle::Encode() const {
  char raw[kHandleBytes];
  raw[0] = static_cast<char>(kHandleVersion);
  EncodeFixed64(raw + 1, static_cast<uint64_t>(physical_offset.value()));
  EncodeFixed64(raw + 9, static_cast<uint64_t>(deliver_ms));
  EncodeFixed32(raw + 17, id_crc);
  EncodeFixed32(raw + 21, crc32c::Value(raw, 21));
  std::string out(kHandleBytes * 2, '0');
  for (size_t i = 0; i < kHandleBytes; ++i) {
    auto u = static_cast<unsigned char>(raw[i]);
    out[2 * i] = kHex[u >> 4];
    out[2 * i + 1] = kHex[u & 15];
  }
  return out;
}

absl::StatusOr<RecallHandle> RecallHandle::Decode(std::string_view text) {
  if (text.size() != kHandleBytes * 2) {
    return absl::InvalidArgumentError("recall handle: expected 50 hex digits");
  }
  char raw[kHandleBytes];
  for (size_t i = 0; i < kHandleBytes; ++i) {
    int hi = HexValue(text[2 * i]), lo = HexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("recall handle: not hex");
    raw[i] = static_cast<char>((hi << 4) | lo);
  }
  if (static_cast<uint8_t>(raw[0]) != kHandleVersion) {
    return absl::InvalidArgumentError("recall handle: unknown version");
  }
  if (DecodeFixed32(raw + 21) != crc32c::Value(raw, 21)) {
    return absl::NotFoundError("recall handle: unknown handle (checksum mismatch)");
  }
  RecallHandle h;
  h.physical_offset = PhysicalOffset(static_cast<int64_t>(DecodeFixed64(raw + 1)));
  h.deliver_ms = static_cast<int64_t>(DecodeFixed64(raw + 9));
  h.id_crc = DecodeFixed32(raw + 17);
  return h;
}

}  // namespace tokimq
