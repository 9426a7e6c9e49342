// Fuzz target: TimerLog unit decoding (timerstore/timer_log.h, docs/formats/timerlog.md).
//
// The first byte picks a mode; the rest (padded with zeros to 72 bytes) is one unit:
//   even: as stored;  odd: with the size field and the CRC made right first, so every field
//   value reaches the decoder.
// Properties: a unit that decodes re-encodes to exactly the same 72 bytes; any field values
// (the first 64 payload bytes read as fields) encode to a unit that decodes to them.
#include <cstdint>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "fuzz_check.h"
#include "timerstore/timer_log.h"

namespace tokimq {
namespace {

bool SameUnit(const TimerUnit& a, const TimerUnit& b) {
  return a.flags == b.flags && a.prev_pos == b.prev_pos && a.write_ms == b.write_ms &&
         a.deliver_ms == b.deliver_ms && a.slot_tick == b.slot_tick &&
         a.physical_offset == b.physical_offset && a.ref == b.ref && a.msg_size == b.msg_size &&
         a.topic_hash == b.topic_hash && a.roll_count == b.roll_count;
}

}  // namespace
}  // namespace tokimq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq;
  if (size == 0) return 0;
  std::string unit(reinterpret_cast<const char*>(data + 1), size - 1);
  unit.resize(kTimerUnitSize, '\0');
  if (data[0] & 1) {
    EncodeFixed32(unit.data(), static_cast<uint32_t>(kTimerUnitSize));
    EncodeFixed32(unit.data() + 68, crc32c::Value(unit.data(), 68));
  }
  TimerUnit u;
  absl::Status s = DecodeTimerUnit(unit.data(), &u);
  if (s.ok()) {
    char again[kTimerUnitSize];
    EncodeTimerUnit(u, again);
    FUZZ_CHECK(std::string_view(again, kTimerUnitSize) == unit);
  } else {
    FUZZ_CHECK(absl::IsDataLoss(s));
  }

  // Field values straight from the input: encode, decode.
  const char* p = unit.data();
  TimerUnit f;
  f.flags = DecodeFixed32(p);
  f.prev_pos = TimerLogPosition(static_cast<int64_t>(DecodeFixed64(p + 4)));
  f.write_ms = static_cast<int64_t>(DecodeFixed64(p + 12));
  f.deliver_ms = static_cast<int64_t>(DecodeFixed64(p + 20));
  f.slot_tick = static_cast<int64_t>(DecodeFixed64(p + 28));
  f.physical_offset = PhysicalOffset(static_cast<int64_t>(DecodeFixed64(p + 36)));
  f.ref = static_cast<int64_t>(DecodeFixed64(p + 44));
  f.msg_size = DecodeFixed32(p + 52);
  f.topic_hash = DecodeFixed32(p + 56);
  f.roll_count = DecodeFixed32(p + 60);
  char enc[kTimerUnitSize];
  EncodeTimerUnit(f, enc);
  TimerUnit back;
  FUZZ_CHECK(DecodeTimerUnit(enc, &back).ok());
  FUZZ_CHECK(SameUnit(f, back));
  return 0;
}
