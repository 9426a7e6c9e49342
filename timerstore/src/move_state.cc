#include "move_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/status.h"

namespace tokimq {
namespace {

constexpr uint32_t kMoveStateMagic = 0x564D'4B54;  // "TKMV"
constexpr uint32_t kMoveStateVersion = 1;
constexpr size_t kFixedBody = 3 * 8 + 4;
constexpr uint32_t kMaxAbandoned = 1u << 20;

}  // namespace

bool MoveState::Committed(uint64_t epoch) const {
  if (epoch == 0 || epoch > committed_epoch) return false;
  return std::none_of(abandoned.begin(), abandoned.end(),
                      [epoch](const AbandonedMove& a) { return a.epoch == epoch; });
}

std::string MoveState::Encode() const {
  std::string out;
  PutFixed32(&out, kMoveStateMagic);
  PutFixed32(&out, kMoveStateVersion);
  std::string body;
  PutFixed64(&body, static_cast<uint64_t>(frontier.value()));
  PutFixed64(&body, started_epoch);
  PutFixed64(&body, committed_epoch);
  PutFixed32(&body, static_cast<uint32_t>(abandoned.size()));
  for (const AbandonedMove& a : abandoned) {
    PutFixed64(&body, a.epoch);
    PutFixed64(&body, static_cast<uint64_t>(a.copies_end.value()));
  }
  PutFixed32(&out, static_cast<uint32_t>(body.size()));
  out += body;
  PutFixed32(&out, crc32c::Value(out));
  return out;
}

absl::StatusOr<MoveState> MoveState::Decode(std::string_view in) {
  Decoder d(in);
  uint32_t magic = 0, version = 0, len = 0;
  if (!d.GetFixed32(&magic) || !d.GetFixed32(&version) || !d.GetFixed32(&len)) {
    return absl::DataLossError("timer moves: short header");
  }
  if (magic != kMoveStateMagic) return absl::DataLossError("timer moves: bad magic");
  if (version != kMoveStateVersion) {
    return absl::DataLossError(absl::StrCat("timer moves: unknown version ", version));
  }
  if (len < kFixedBody || d.remaining() != static_cast<size_t>(len) + 4) {
    return absl::DataLossError(absl::StrCat("timer moves: bad length ", len));
  }
  if (crc32c::Value(in.data(), 12 + len) != DecodeFixed32(in.data() + 12 + len)) {
    return absl::DataLossError("timer moves: CRC mismatch");
  }
  MoveState s;
  uint64_t frontier = 0;
  uint32_t n = 0;
  d.GetFixed64(&frontier);
  d.GetFixed64(&s.started_epoch);
  d.GetFixed64(&s.committed_epoch);
  d.GetFixed32(&n);
  s.frontier = PhysicalOffset(static_cast<int64_t>(frontier));
  if (n > kMaxAbandoned || len != kFixedBody + static_cast<size_t>(n) * 16) {
    return absl::DataLossError("timer moves: bad abandoned count");
  }
  s.abandoned.resize(n);
  for (AbandonedMove& a : s.abandoned) {
    uint64_t end = 0;
    d.GetFixed64(&a.epoch);
    d.GetFixed64(&end);
    a.copies_end = PhysicalOffset(static_cast<int64_t>(end));
  }
  return s;
}

absl::StatusOr<MoveState> LoadMoveState(FileSystem* fs, const std::string& path) {
  if (!fs->Exists(path)) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  TOKIMQ_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(fs, path));
  auto s = MoveState::Decode(bytes);
  if (!s.ok()) return absl::DataLossError(absl::StrCat(s.status().message(), " in ", path));
  return s;
}

absl::Status StoreMoveState(FileSystem* fs, const std::string& path, const MoveState& state) {
  return WriteFileAtomic(fs, path, state.Encode());
}

}  // namespace tokimq
