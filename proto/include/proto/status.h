// absl::Status <-> proto::Status, the error representation on the wire: the absl code number
// and the message text travel unchanged, so a client sees the broker's own error text.
#pragma once

#include "absl/status/status.h"
#include "proto/tokimq.pb.h"

namespace tokimq::wire {

inline void ToProto(const absl::Status& s, proto::Status* out) {
  out->set_code(static_cast<int32_t>(s.code()));
  out->set_message(std::string(s.message()));
}

// Unknown code numbers become kUnknown (the text is kept).
inline absl::Status FromProto(const proto::Status& s) {
  if (s.code() == 0) return absl::OkStatus();
  int code = s.code();
  if (code < 0 || code > 16) code = static_cast<int>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code), s.message());
}

}  // namespace tokimq::wire
