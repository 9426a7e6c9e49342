// FileSystem::DiskSpace on the POSIX file system reports what df reports: free = df's Avail,
// total = df's Used + Avail (blocks reserved for root are neither), so the broker's disk
// watermark (broker/src/disk_watermark.h) reads the same Use% an operator sees. The CI machine
// has 155 GB of 252 GB reserved: with all blocks as the size, df's 70 % read as 90 % and every
// producer send was refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/file.h"
#include "test_util.h"

namespace tokimq {
namespace {

struct DfFigures {
  uint64_t used = 0;
  uint64_t avail = 0;
};

// `df -B1 --output=used,avail DIR`: a header line, then "USED AVAIL" in bytes.
bool RunDf(const std::string& dir, DfFigures* out) {
  const std::string cmd = "df -B1 --output=used,avail '" + dir + "' 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  char line[256];
  bool ok = std::fgets(line, sizeof(line), p) != nullptr &&  // header
            std::fgets(line, sizeof(line), p) != nullptr;
  ::pclose(p);
  if (!ok) return false;
  unsigned long long used = 0, avail = 0;
  if (std::sscanf(line, "%llu %llu", &used, &avail) != 2) return false;
  out->used = used;
  out->avail = avail;
  return true;
}

TEST(PosixDiskSpaceTest, SizeAndFreeAreDfsUsedPlusAvailAndAvail) {
  testing::TempDir dir;
  DfFigures df;
  ASSERT_TRUE(RunDf(dir.path(), &df)) << "df -B1 --output=used,avail failed";
  auto space = FileSystem::Default()->DiskSpace(dir.path());
  ASSERT_TRUE(space.ok()) << space.status();
  // Other processes write between the two readings: allow 256 MiB of drift.
  constexpr int64_t kDrift = int64_t{256} << 20;
  EXPECT_LE(std::llabs(static_cast<int64_t>(space->free_bytes) - static_cast<int64_t>(df.avail)),
            kDrift)
      << "free " << space->free_bytes << " df avail " << df.avail;
  EXPECT_LE(std::llabs(static_cast<int64_t>(space->total_bytes) -
                       static_cast<int64_t>(df.used + df.avail)),
            kDrift)
      << "total " << space->total_bytes << " df used+avail " << df.used + df.avail;
  EXPECT_LE(space->free_bytes, space->total_bytes);
}

}  // namespace
}  // namespace tokimq
