#include "common/crc32c.h"

#include <isa-l/crc.h>

namespace tokimq::crc32c {

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  // ISA-L's crc32_iscsi works on the non-inverted register; the standard CRC32C inverts the
  // register on entry and exit.
  return crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(n),
                     crc ^ 0xFFFFFFFFu) ^
         0xFFFFFFFFu;
}

uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

}  // namespace tokimq::crc32c
