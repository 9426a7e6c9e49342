// CRC32C (Castagnoli, the iSCSI polynomial) through ISA-L. Standard parameters: the check value
// of "123456789" is 0xE3069283. Thread-safe, no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tokimq::crc32c {

// CRC32C of `n` bytes.
uint32_t Value(const void* data, size_t n);
inline uint32_t Value(std::string_view s) { return Value(s.data(), s.size()); }

// CRC32C of the concatenation A+B given crc = Value(A): lets a record's checksum cover a
// header and a payload kept in separate buffers.
uint32_t Extend(uint32_t crc, const void* data, size_t n);

}  // namespace tokimq::crc32c
