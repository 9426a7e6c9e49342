// Fuzz target: recall handles (timerstore/recall_handle.h).
//
// The first byte picks a mode, the rest is the payload:
//   even: the payload as handle text.
//   odd:  the payload's bytes (zero-padded to 25) as a binary handle with a valid version and
//         check, hex-encoded, so decoding gets past the checksum.
// Properties: a handle that decodes re-encodes to the same text in lowercase; any
// (offset, deliver time, id crc) encodes to 50 lowercase hex digits that decode to it.
#include <cctype>
#include <cstdint>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "fuzz_check.h"
#include "timerstore/recall_handle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq;
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    std::string raw = text;
    raw.resize(25, '\0');
    raw[0] = 1;  // version
    EncodeFixed32(raw.data() + 21, crc32c::Value(raw.data(), 21));
    static constexpr char kHex[] = "0123456789abcdef";
    text.clear();
    for (unsigned char c : raw) {
      text.push_back(kHex[c >> 4]);
      text.push_back(kHex[c & 15]);
    }
  }
  absl::StatusOr<RecallHandle> h = RecallHandle::Decode(text);
  if (h.ok()) {
    std::string lower = text;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    FUZZ_CHECK(h->Encode() == lower);
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(h.status()) || absl::IsNotFound(h.status()));
    FUZZ_CHECK(!(data[0] & 1));  // a handle with a valid check always decodes
  }

  if (size >= 21) {
    RecallHandle r;
    r.physical_offset = PhysicalOffset(
        static_cast<int64_t>(DecodeFixed64(reinterpret_cast<const char*>(data + 1))));
    r.deliver_ms = static_cast<int64_t>(DecodeFixed64(reinterpret_cast<const char*>(data + 9)));
    r.id_crc = DecodeFixed32(reinterpret_cast<const char*>(data + 17));
    const std::string enc = r.Encode();
    FUZZ_CHECK(enc.size() == 50);
    absl::StatusOr<RecallHandle> back = RecallHandle::Decode(enc);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->physical_offset == r.physical_offset && back->deliver_ms == r.deliver_ms &&
               back->id_crc == r.id_crc);
  }
  return 0;
}
