// RecallHandle: what Schedule returns so the sender can cancel. It names the timer-topic record
// (physical offset), the deliver time and a CRC32C of the message id (or body when there is no
// id), plus a CRC32C of those fields; printed as 50 lowercase hex digits (no spaces).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "commitlog/message.h"
#include "common/offsets.h"

namespace tokimq {

struct RecallHandle {
  PhysicalOffset physical_offset = PhysicalOffset::kNone();  // of the timer-topic record
  int64_t deliver_ms = 0;
  uint32_t id_crc = 0;

  std::string Encode() const;
  // The id_crc of `m`: CRC32C of its message id (UNIQ_KEY), or of its body when it has none.
  static uint32_t IdCrcOf(const Message& m);
  // kInvalidArgument when not 50 hex digits or the version is unknown; kNotFound when the
  // embedded CRC does not match (a handle this broker never issued).
  static absl::StatusOr<RecallHandle> Decode(std::string_view text);
};

}  // namespace tokimq
