// Fuzz target: receipt handles (broker/src/consumer/receipt_handle.h, EncodeReceipt /
// DecodeReceipt; docs/formats/group-state.md).
//
// The first byte picks a mode, the next 8 are the handle secret, the rest is the payload:
//   mode % 3 == 0: the payload as handle text.
//   mode % 3 == 1: the payload as the binary form of a handle; the check is made right for the
//                  secret and it is hex-encoded, so decoding reaches the fields.
//   mode % 3 == 2: a Receipt built from the payload: encode, then decode.
// Properties: a handle that decodes re-encodes to exactly the same text; a Receipt with valid
// names, queue id >= 0 and offset >= 0 encodes to a handle that decodes to it (and to no
// handle otherwise); no handle longer than kMaxHandleChars decodes.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "consumer/receipt_handle.h"
#include "fuzz_check.h"

namespace tokimq::consumer {
namespace {

bool SameReceipt(const Receipt& a, const Receipt& b) {
  return a.queue == b.queue && a.queue_offset == b.queue_offset && a.epoch == b.epoch &&
         a.invisible_until_ms == b.invisible_until_ms;
}

std::string Hex(std::string_view bin) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bin) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

void CheckText(std::string_view text, uint64_t secret) {
  absl::StatusOr<Receipt> r = DecodeReceipt(text, secret);
  if (!r.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(r.status()));
    return;
  }
  FUZZ_CHECK(text.size() <= kMaxHandleChars);
  FUZZ_CHECK(EncodeReceipt(*r, secret) == text);
}

}  // namespace
}  // namespace tokimq::consumer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq;
  using namespace tokimq::consumer;
  if (size < 9) return 0;
  const uint64_t secret = DecodeFixed64(reinterpret_cast<const char*>(data + 1));
  std::string payload(reinterpret_cast<const char*>(data + 9), size - 9);
  switch (data[0] % 3) {
    case 0:
      CheckText(payload, secret);
      break;
    case 1: {
      // check = CRC32C(secret LE || payload)
      char key[8];
      EncodeFixed64(key, secret);
      uint32_t crc = crc32c::Value(key, 8);
      crc = crc32c::Extend(crc, payload.data(), payload.size());
      PutFixed32(&payload, crc);
      CheckText(Hex(payload), secret);
      break;
    }
    case 2: {
      FuzzedDataProvider in(data + 9, size - 9);
      Receipt r;
      r.queue.group = in.ConsumeRandomLengthString(300);
      r.queue.topic = in.ConsumeRandomLengthString(300);
      r.queue.read_topic = in.ConsumeRandomLengthString(300);
      r.queue.queue_id = in.ConsumeIntegral<int32_t>();
      r.queue_offset = in.ConsumeIntegral<int64_t>();
      r.epoch = in.ConsumeIntegral<uint32_t>();
      r.invisible_until_ms = in.ConsumeIntegral<int64_t>();
      const bool valid = ValidGroupName(r.queue.group) && ValidTopicName(r.queue.topic) &&
                         ValidTopicName(r.queue.read_topic) && r.queue.queue_id >= 0 &&
                         r.queue_offset >= 0;
      const std::string handle = EncodeReceipt(r, secret);
      absl::StatusOr<Receipt> back = DecodeReceipt(handle, secret);
      FUZZ_CHECK(back.ok() == valid);
      if (valid) FUZZ_CHECK(SameReceipt(*back, r));
      break;
    }
  }
  return 0;
}
