// FNV-1a 64: the one stable string hash of tokimq (the same value on every host, build and
// run). Used where a hash is part of a contract: the queue of a key or FIFO message group
// (docs/protocol.md "Send"), the ordering key hash of the client's planner (docs/ordering.md).
// Parameters from the FNV specification (draft-eastlake-fnv): offset basis
// 14695981039346656037 (0xcbf29ce484222325), prime 1099511628211 (0x100000001b3).
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace tokimq {

inline constexpr uint64_t kFnv1a64OffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ULL;

// FNV-1a 64 of the bytes of `s` ("" hashes to the offset basis).
constexpr uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = kFnv1a64OffsetBasis;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnv1a64Prime;
  }
  return h;
}

}  // namespace tokimq
