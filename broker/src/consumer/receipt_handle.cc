#include "consumer/receipt_handle.h"

#include <array>
#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"

namespace tokimq::consumer {
namespace {
constexpr uint8_t kReceiptVersion = 1;
}  // namespace

namespace {
uint32_t ReceiptCheck(std::string_view payload, uint64_t secret) {
  char key[8];
  EncodeFixed64(key, secret);
  uint32_t crc = crc32c::Value(key, sizeof(key));
  return crc32c::Extend(crc, payload.data(), payload.size());
}
constexpr char kHex[] = "0123456789abcdef";
// The two hex digits of each byte value (one copy per byte when expanding a handle).
constexpr std::array<std::array<char, 2>, 256> kHexPair = [] {
  std::array<std::array<char, 2>, 256> t{};
  for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = {kHex[i >> 4], kHex[i & 15]};
  return t;
}();
// Hex digit value, or 0x100 (bit 8 set: not a digit; OR-ed over a handle, checked once).
constexpr std::array<uint16_t, 256> kHexVal = [] {
  std::array<uint16_t, 256> t{};
  for (auto& v : t) v = 0x100;
  for (int i = 0; i < 10; ++i) t['0' + i] = static_cast<uint16_t>(i);
  for (int i = 0; i < 6; ++i) t['a' + i] = static_cast<uint16_t>(10 + i);
  return t;
}();
// Appends `n` bytes at `src` to `dst` (stack buffer with room, checked by the caller).
char* Put(char* dst, const void* src, size_t n) {
  std::memcpy(dst, src, n);
  return dst + n;
}
}  // namespace

std::string EncodeReceipt(const Receipt& r, uint64_t secret) {
  // Binary form on the stack (names are at most 255 bytes each, so it fits), then expanded to
  // hex two digits at a time. A receive encodes one handle per message: this is on its path.
  char bin[1 + 3 * (4 + 255 + 16) + 4 + 8 + 4 + 8 + 4];
  const size_t names = r.queue.group.size() + r.queue.topic.size() + r.queue.read_topic.size();
  if (names > 3 * (255 + 16)) return std::string();  // never: names are validated before
  char* p = bin;
  *p++ = static_cast<char>(kReceiptVersion);
  for (const std::string* s : {&r.queue.group, &r.queue.topic, &r.queue.read_topic}) {
    char len[4];
    EncodeFixed32(len, static_cast<uint32_t>(s->size()));
    p = Put(p, len, 4);
    p = Put(p, s->data(), s->size());
  }
  char tail[4 + 8 + 4 + 8];
  EncodeFixed32(tail, static_cast<uint32_t>(r.queue.queue_id));
  EncodeFixed64(tail + 4, static_cast<uint64_t>(r.queue_offset));
  EncodeFixed32(tail + 12, r.epoch);
  EncodeFixed64(tail + 16, static_cast<uint64_t>(r.invisible_until_ms));
  p = Put(p, tail, sizeof(tail));
  char check[4];
  EncodeFixed32(check, ReceiptCheck(std::string_view(bin, static_cast<size_t>(p - bin)), secret));
  p = Put(p, check, 4);
  const auto n = static_cast<size_t>(p - bin);
  std::string out(n * 2, '\0');
  char* o = out.data();
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(o + 2 * i, kHexPair[static_cast<unsigned char>(bin[i])].data(), 2);
  }
  return out;
}

absl::StatusOr<Receipt> DecodeReceipt(std::string_view handle, uint64_t secret) {
  auto bad = [](const char* why) {
    return absl::InvalidArgumentError(std::string("malformed receipt handle: ") + why);
  };
  if (handle.empty() || handle.size() > kMaxHandleChars || handle.size() % 2 != 0) {
    return bad("length");
  }
  char bin[kMaxHandleChars / 2];
  const size_t n = handle.size() / 2;
  unsigned invalid = 0;  // bit 8 of any digit's value: checked once, after the loop
  for (size_t i = 0; i < n; ++i) {
    const unsigned hi = kHexVal[static_cast<unsigned char>(handle[2 * i])];
    const unsigned lo = kHexVal[static_cast<unsigned char>(handle[2 * i + 1])];
    invalid |= hi | lo;
    bin[i] = static_cast<char>(hi << 4 | lo);
  }
  if (invalid & 0x100) return bad("not hex");
  if (n < 5) return bad("length");
  std::string_view payload(bin, n - 4);
  if (ReceiptCheck(payload, secret) != DecodeFixed32(bin + n - 4)) {
    return bad("checksum");
  }
  Decoder d(payload);
  std::string_view version, group, topic, read_topic;
  uint32_t qid = 0, epoch = 0;
  uint64_t offset = 0, until = 0;
  if (!d.GetBytes(1, &version) || static_cast<uint8_t>(version[0]) != kReceiptVersion ||
      !d.GetLengthPrefixed(&group) || !d.GetLengthPrefixed(&topic) ||
      !d.GetLengthPrefixed(&read_topic) || !d.GetFixed32(&qid) || !d.GetFixed64(&offset) ||
      !d.GetFixed32(&epoch) || !d.GetFixed64(&until) || d.remaining() != 0) {
    return bad("fields");
  }
  if (!ValidGroupName(group) || !ValidTopicName(topic) || !ValidTopicName(read_topic) ||
      static_cast<int32_t>(qid) < 0 || static_cast<int64_t>(offset) < 0) {
    return bad("fields");
  }
  Receipt r;
  r.queue.group.assign(group.data(), group.size());
  r.queue.topic.assign(topic.data(), topic.size());
  r.queue.read_topic.assign(read_topic.data(), read_topic.size());
  r.queue.queue_id = static_cast<int32_t>(qid);
  r.queue_offset = static_cast<int64_t>(offset);
  r.epoch = epoch;
  r.invisible_until_ms = static_cast<int64_t>(until);
  return r;
}

}  // namespace tokimq::consumer
