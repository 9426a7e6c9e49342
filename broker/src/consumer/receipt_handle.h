// Receipt handle: the opaque, printable token that names one delivery (one lease) of a
// consumer group. Ack, renew and nack take it. Grammar and worked example:
// docs/formats/group-state.md "Receipt handle".
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "consumer/group_state.h"

namespace tokimq::consumer {

// What a receipt handle names: one delivery (queue offset at a lease epoch).
struct Receipt {
  QueueKey queue;
  int64_t queue_offset = 0;
  uint32_t epoch = 0;
  int64_t invisible_until_ms = 0;
};
inline constexpr size_t kMaxHandleChars = 4096;
// Lowercase hex of: u8 version, group, topic, read_topic (u32 length + bytes each), i32 queue
// id, i64 queue offset, u32 epoch, i64 invisible_until_ms, u32 check; check = CRC32C over the
// 8-byte LE `secret` followed by every preceding byte.
std::string EncodeReceipt(const Receipt& r, uint64_t secret);
// kInvalidArgument for anything malformed, garbled or signed with another secret.
absl::StatusOr<Receipt> DecodeReceipt(std::string_view handle, uint64_t secret);

}  // namespace tokimq::consumer
