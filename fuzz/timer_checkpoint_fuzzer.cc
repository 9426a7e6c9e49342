// Fuzz target: TimerCheckpoint decoding (timerstore/timer_checkpoint.h,
// docs/formats/timercheckpoint.md).
//
// The first byte picks a mode, the rest is a checkpoint file:
//   bit 0 set: magic, version, body length and the trailing CRC are made right first, so the
//   fuzzer reaches the counts and entries behind them.
// Properties: a decoded checkpoint re-encodes to bytes that decode to the same checkpoint, and
// to exactly the input when its pin buckets were strictly ascending (the order Encode writes
// a std::map in; duplicates or disorder collapse in the map).
#include <cstdint>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "fuzz_check.h"
#include "timerstore/timer_checkpoint.h"

namespace tokimq {
namespace {

constexpr size_t kHeader = 12;          // magic, version, body length
constexpr size_t kFixedBody = 8 * 8;    // eight i64 counters

bool Same(const TimerCheckpointData& a, const TimerCheckpointData& b) {
  if (a.recalled.size() != b.recalled.size()) return false;
  for (size_t i = 0; i < a.recalled.size(); ++i) {
    if (a.recalled[i].physical_offset != b.recalled[i].physical_offset ||
        a.recalled[i].deliver_ms != b.recalled[i].deliver_ms) {
      return false;
    }
  }
  return a.precision_ms == b.precision_ms && a.read_tick == b.read_tick &&
         a.timerlog_flush_pos == b.timerlog_flush_pos &&
         a.timerlog_scan_from == b.timerlog_scan_from &&
         a.enqueue_queue_offset == b.enqueue_queue_offset &&
         a.last_enqueued_physical_offset == b.last_enqueued_physical_offset &&
         a.commitlog_scan_from == b.commitlog_scan_from && a.pending == b.pending &&
         a.pins == b.pins;
}

// True when the input's pin buckets (i64, signed order) are strictly ascending.
bool PinsAscending(std::string_view in) {
  const size_t count_at = kHeader + kFixedBody;
  if (in.size() < count_at + 4) return false;
  const uint32_t n = DecodeFixed32(in.data() + count_at);
  for (uint32_t i = 1; i < n; ++i) {
    const char* prev = in.data() + count_at + 4 + 16 * (i - 1);
    if (static_cast<int64_t>(DecodeFixed64(prev)) >= static_cast<int64_t>(DecodeFixed64(prev + 16))) {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace tokimq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq;
  if (size == 0) return 0;
  std::string in(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) && in.size() >= kHeader + 4) {
    TimerCheckpointData empty;
    const std::string ref = empty.Encode();
    in.replace(0, 8, ref, 0, 8);  // magic, version
    EncodeFixed32(in.data() + 8, static_cast<uint32_t>(in.size() - kHeader - 4));
    EncodeFixed32(in.data() + in.size() - 4, crc32c::Value(in.data(), in.size() - 4));
  }
  absl::StatusOr<TimerCheckpointData> c = TimerCheckpointData::Decode(in);
  if (!c.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(c.status()));
    return 0;
  }
  const std::string again = c->Encode();
  absl::StatusOr<TimerCheckpointData> back = TimerCheckpointData::Decode(again);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(Same(*c, *back));
  FUZZ_CHECK(back->Encode() == again);
  if (PinsAscending(in)) FUZZ_CHECK(again == in);
  return 0;
}
