// Fuzz target: TimerWheel slot records and the wheel file (timerstore/timer_wheel.h,
// docs/formats/timerwheel.md).
//
// The first byte picks a mode, the rest is the payload:
//   mode % 4 == 0: one 32-byte slot record (zero-padded), as stored.
//   mode % 4 == 1: the same with its CRC made right first, so every field value is decoded.
//   mode % 4 == 2: a wheel file: a valid header for (precision, slot count) taken from the
//                  payload's first two bytes, then the payload's slot records (CRCs made right
//                  on the records whose first byte is odd), opened with TimerWheel::Open.
//   mode % 4 == 3: a whole wheel file as given (header included), opened with 4 slots.
// Properties: a slot that decodes (other than the empty record) re-encodes to the same 32
// bytes; decode(encode(s)) == s for any field values; Open counts exactly the records that
// fail their CRC and Get returns every decoded live slot as stored.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/file.h"
#include "fuzz_check.h"
#include "timerstore/timer_wheel.h"

namespace tokimq {
namespace {

bool SameSlot(const TimerSlot& a, const TimerSlot& b) {
  return a.tick == b.tick && a.first_pos == b.first_pos && a.last_pos == b.last_pos &&
         a.count == b.count;
}

// The default slot: the one stored as 32 zero bytes.
bool IsEmpty(const TimerSlot& s) { return SameSlot(s, TimerSlot{}); }

void CheckSlot(std::string rec, bool fix_crc) {
  rec.resize(TimerWheel::kSlotSize, '\0');
  if (fix_crc) EncodeFixed32(rec.data() + 28, crc32c::Value(rec.data(), 28));
  TimerSlot s;
  if (DecodeTimerSlot(rec.data(), &s)) {
    char again[TimerWheel::kSlotSize];
    EncodeTimerSlot(s, again);
    if (!IsEmpty(s)) FUZZ_CHECK(std::string_view(again, sizeof(again)) == rec);
    TimerSlot back;
    FUZZ_CHECK(DecodeTimerSlot(again, &back));
    FUZZ_CHECK(SameSlot(s, back));
  }
  // Any field values (the record's bytes read as fields) survive encode + decode.
  TimerSlot f;
  f.tick = static_cast<int64_t>(DecodeFixed64(rec.data()));
  f.first_pos = TimerLogPosition(static_cast<int64_t>(DecodeFixed64(rec.data() + 8)));
  f.last_pos = TimerLogPosition(static_cast<int64_t>(DecodeFixed64(rec.data() + 16)));
  f.count = DecodeFixed32(rec.data() + 24);
  char enc[TimerWheel::kSlotSize];
  EncodeTimerSlot(f, enc);
  TimerSlot back;
  FUZZ_CHECK(DecodeTimerSlot(enc, &back));
  FUZZ_CHECK(SameSlot(f, back));
}

// A plain char array: it outlives every destructor, so the exit handler can still read it.
char g_temp_path[512];

void RemoveTempFile() { std::remove(g_temp_path); }

std::string TempPath() {
  if (g_temp_path[0] == '\0') {
    const char* base = std::getenv("TOKIMQ_FUZZ_TMPDIR");
    std::string dir = base != nullptr ? base : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    std::snprintf(g_temp_path, sizeof(g_temp_path), "%s/tokimq-fuzz-wheel-%d", dir.c_str(),
                  static_cast<int>(getpid()));
    std::atexit(RemoveTempFile);
  }
  return g_temp_path;
}

void CheckFile(const std::string& file, int64_t precision_ms, uint64_t slot_count) {
  FileSystem* fs = FileSystem::Default();
  const std::string path = TempPath();
  {
    auto f = fs->Open(path, OpenMode::kTruncate);
    FUZZ_CHECK(f.ok());
    FUZZ_CHECK((*f)->PWrite(0, file).ok());
  }
  absl::StatusOr<std::unique_ptr<TimerWheel>> w = TimerWheel::Open(fs, path, precision_ms, slot_count);
  if (!w.ok()) {
    FUZZ_CHECK(file.size() >= TimerWheel::kHeaderSize);  // a short file is recreated, never an error
    return;
  }
  // What Load must have seen: the slot records present (missing ones read as zero).
  int64_t corrupt = 0;
  for (uint64_t i = 0; i < slot_count; ++i) {
    std::string rec(TimerWheel::kSlotSize, '\0');
    const size_t at = TimerWheel::kHeaderSize + i * TimerWheel::kSlotSize;
    if (file.size() >= TimerWheel::kHeaderSize && at < file.size()) {
      rec = file.substr(at, TimerWheel::kSlotSize);
      rec.resize(TimerWheel::kSlotSize, '\0');
    }
    TimerSlot s;
    if (file.size() < TimerWheel::kHeaderSize) continue;  // recreated empty
    if (!DecodeTimerSlot(rec.data(), &s)) {
      ++corrupt;
      continue;
    }
    if (s.tick >= 0 && s.count > 0 && s.tick % static_cast<int64_t>(slot_count) == static_cast<int64_t>(i)) {
      FUZZ_CHECK(SameSlot((*w)->Get(s.tick), s));
    }
  }
  FUZZ_CHECK((*w)->corrupt_slots() == corrupt);
}

}  // namespace
}  // namespace tokimq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq;
  if (size == 0) return 0;
  std::string payload(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0:
      CheckSlot(payload, false);
      break;
    case 1:
      CheckSlot(payload, true);
      break;
    case 2: {
      if (payload.size() < 2) return 0;
      const int64_t precision_ms = 1 + static_cast<uint8_t>(payload[0]);
      const uint64_t slot_count = 1 + static_cast<uint8_t>(payload[1]) % 64;
      std::string file = EncodeTimerWheelHeader(precision_ms, slot_count);
      std::string slots = payload.substr(2, slot_count * TimerWheel::kSlotSize);
      for (size_t at = 0; at + TimerWheel::kSlotSize <= slots.size(); at += TimerWheel::kSlotSize) {
        if (slots[at] & 1) EncodeFixed32(slots.data() + at + 28, crc32c::Value(slots.data() + at, 28));
      }
      CheckFile(file + slots, precision_ms, slot_count);
      break;
    }
    case 3:
      CheckFile(payload.substr(0, TimerWheel::kHeaderSize + 4 * TimerWheel::kSlotSize), 1000, 4);
      break;
  }
  return 0;
}
