#include "timerstore/timer_checkpoint.h"

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/status.h"

namespace tokimq {
namespace {

constexpr uint32_t kCheckpointMagic = 0x4B43'4B54;  // "TKCK"
constexpr uint32_t kCheckpointVersion = 1;
constexpr size_t kFixedBody = 8 * 8;
constexpr uint32_t kMaxEntries = 1u << 26;

}  // namespace

std::string TimerCheckpointData::Encode() const {
  std::string out;
  PutFixed32(&out, kCheckpointMagic);
  PutFixed32(&out, kCheckpointVersion);
  std::string body;
  for (int64_t v : {precision_ms, read_tick, timerlog_flush_pos.value(), timerlog_scan_from.value(),
                    enqueue_queue_offset.value(), last_enqueued_physical_offset.value(),
                    commitlog_scan_from.value(), pending}) {
    PutFixed64(&body, static_cast<uint64_t>(v));
  }
  PutFixed32(&body, static_cast<uint32_t>(pins.size()));
  for (const auto& [bucket, count] : pins) {
    PutFixed64(&body, static_cast<uint64_t>(bucket));
    PutFixed64(&body, static_cast<uint64_t>(count));
  }
  PutFixed32(&body, static_cast<uint32_t>(recalled.size()));
  for (const RecalledEntry& r : recalled) {
    PutFixed64(&body, static_cast<uint64_t>(r.physical_offset.value()));
    PutFixed64(&body, static_cast<uint64_t>(r.deliver_ms));
  }
  PutFixed32(&out, static_cast<uint32_t>(body.size()));
  out += body;
  PutFixed32(&out, crc32c::Value(out));
  return out;
}

absl::StatusOr<TimerCheckpointData> TimerCheckpointData::Decode(std::string_view in) {
  Decoder d(in);
  uint32_t magic = 0, version = 0, len = 0;
  if (!d.GetFixed32(&magic) || !d.GetFixed32(&version) || !d.GetFixed32(&len)) {
    return absl::DataLossError("timer checkpoint: short header");
  }
  if (magic != kCheckpointMagic) return absl::DataLossError("timer checkpoint: bad magic");
  if (version != kCheckpointVersion) {
    return absl::DataLossError(absl::StrCat("timer checkpoint: unknown version ", version));
  }
  if (len < kFixedBody + 8 || d.remaining() != static_cast<size_t>(len) + 4) {
    return absl::DataLossError(absl::StrCat("timer checkpoint: bad length ", len));
  }
  if (crc32c::Value(in.data(), 12 + len) != DecodeFixed32(in.data() + 12 + len)) {
    return absl::DataLossError("timer checkpoint: CRC mismatch");
  }
  TimerCheckpointData c;
  uint64_t v[8];
  for (uint64_t& x : v) d.GetFixed64(&x);
  c.precision_ms = static_cast<int64_t>(v[0]);
  c.read_tick = static_cast<int64_t>(v[1]);
  c.timerlog_flush_pos = TimerLogPosition(static_cast<int64_t>(v[2]));
  c.timerlog_scan_from = TimerLogPosition(static_cast<int64_t>(v[3]));
  c.enqueue_queue_offset = QueueOffset(static_cast<int64_t>(v[4]));
  c.last_enqueued_physical_offset = PhysicalOffset(static_cast<int64_t>(v[5]));
  c.commitlog_scan_from = PhysicalOffset(static_cast<int64_t>(v[6]));
  c.pending = static_cast<int64_t>(v[7]);
  uint32_t n = 0;
  if (!d.GetFixed32(&n) || n > kMaxEntries || d.remaining() < static_cast<size_t>(n) * 16 + 8) {
    return absl::DataLossError("timer checkpoint: bad pin count");
  }
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t b = 0, cnt = 0;
    d.GetFixed64(&b);
    d.GetFixed64(&cnt);
    c.pins[static_cast<int64_t>(b)] = static_cast<int64_t>(cnt);
  }
  if (!d.GetFixed32(&n) || n > kMaxEntries || d.remaining() != static_cast<size_t>(n) * 16 + 4) {
    return absl::DataLossError("timer checkpoint: bad recalled count");
  }
  c.recalled.resize(n);
  for (RecalledEntry& r : c.recalled) {
    uint64_t a = 0, b = 0;
    d.GetFixed64(&a);
    d.GetFixed64(&b);
    r.physical_offset = PhysicalOffset(static_cast<int64_t>(a));
    r.deliver_ms = static_cast<int64_t>(b);
  }
  return c;
}

absl::StatusOr<TimerCheckpointData> LoadTimerCheckpoint(FileSystem* fs, const std::string& path) {
  TOKIMQ_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(fs, path));
  auto c = TimerCheckpointData::Decode(bytes);
  if (!c.ok()) return absl::DataLossError(absl::StrCat(c.status().message(), " in ", path));
  return c;
}

absl::Status StoreTimerCheckpoint(FileSystem* fs, const std::string& path,
                                  const TimerCheckpointData& data) {
  return WriteFileAtomic(fs, path, data.Encode());
}

}  // namespace tokimq
