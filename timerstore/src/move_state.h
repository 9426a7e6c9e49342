// MoveState: the small state file of the retention mover (retention_mover.cc), replaced
// atomically (WriteFileAtomic: temp file, fsync, rename, directory fsync). It says which moves
// of pending messages count: a copy written by move `epoch` is delivered only when that epoch
// is committed (epoch <= committed_epoch and not abandoned), and every TimerLog unit whose
// record lies below `frontier` is superseded (its message was moved or is gone).
// Grammar: docs/formats/timermoves.md. Value type; no threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file.h"
#include "common/offsets.h"

namespace tokimq {

struct AbandonedMove {
  uint64_t epoch = 0;
  // CommitLog end when the move was abandoned: every copy it wrote lies below. Once the
  // frontier passes it, those copies are superseded anyway and the entry is dropped.
  PhysicalOffset copies_end;
};

struct MoveState {
  PhysicalOffset frontier;               // records below it are moved or gone
  uint64_t started_epoch = 0;            // last move begun (its copies may exist)
  uint64_t committed_epoch = 0;          // last move committed
  std::vector<AbandonedMove> abandoned;  // begun, never committed (crash or race)

  // Whether a copy written by move `epoch` may be delivered.
  bool Committed(uint64_t epoch) const;

  std::string Encode() const;
  // kDataLoss on bad magic, version, length or CRC.
  static absl::StatusOr<MoveState> Decode(std::string_view in);
};

// Loads `path`; kNotFound if it does not exist.
absl::StatusOr<MoveState> LoadMoveState(FileSystem* fs, const std::string& path);
absl::Status StoreMoveState(FileSystem* fs, const std::string& path, const MoveState& state);

}  // namespace tokimq
