// Filling a file system for disk-full tests: FreeBytes and FillDisk, shared by
// tests/integration/disk_full_test.cc (a broker on a small tmpfs) and
// tests/failover/disk_full_follower_test.cc (a follower on one). The filler is allocated with
// fallocate(2), so filling takes no time; removing `<dir>/filler` frees it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"

namespace tokimq::testing {

// Bytes available to an unprivileged writer on the file system of `dir` (statvfs f_bavail);
// 0 when statvfs fails.
inline uint64_t FreeBytes(const std::string& dir) {
  struct statvfs s;
  if (::statvfs(dir.c_str(), &s) != 0) return 0;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

// Grows `<dir>/filler` until only `leave` bytes are free (0: until the disk is full, to the
// last 4 KiB block). Errors: opening the file, or an fallocate failure other than ENOSPC.
inline absl::Status FillDisk(const std::string& dir, uint64_t leave) {
  const std::string path = dir + "/filler";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError("open " + path + ": " + std::strerror(errno));
  struct stat st;
  uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  absl::Status result;
  for (uint64_t chunk = uint64_t{64} << 20; chunk >= 4096;) {
    const uint64_t free = FreeBytes(dir);
    if (free <= leave) break;
    const uint64_t want = std::min(chunk, free - leave);
    if (want < 4096) break;
    if (::fallocate(fd, 0, static_cast<off_t>(size), static_cast<off_t>(want)) == 0) {
      size += want;
    } else if (errno == ENOSPC) {
      chunk /= 2;
    } else {
      result = absl::InternalError("fallocate " + path + ": " + std::strerror(errno));
      break;
    }
  }
  ::close(fd);
  return result;
}

}  // namespace tokimq::testing
