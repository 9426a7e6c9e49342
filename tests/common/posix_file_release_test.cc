// File::ReleaseDescriptor on the POSIX file system: a sealed file gives its descriptor up and is
// read through its mapping (issue 25: CommitLog and TimerLog segments held one descriptor each).
#include <gtest/gtest.h>

#include <string>

#include "common/file.h"
#include "test_util.h"

namespace tokimq {
namespace {

TEST(PosixFileReleaseTest, ReleasedFileIsReadThroughItsMappingWithoutADescriptor) {
  testing::TempDir dir;
  FileSystem* fs = FileSystem::Default();
  auto f = fs->Open(dir.Join("seg"), OpenMode::kTruncate);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Append("hello, sealed segment").ok());
  ASSERT_TRUE((*f)->Sync().ok());
  ASSERT_EQ(testing::OpenDescriptorsUnder(dir.path()), 1);
  ASSERT_TRUE((*f)->ReleaseDescriptor(4096));  // mapped for 4 KiB, more than the file
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir.path()), 0);
  EXPECT_TRUE((*f)->ReleaseDescriptor(4096));  // idempotent
  char buf[64] = {};
  auto n = (*f)->PRead(7, sizeof(buf), buf);  // clamped to the file's size, not the mapping
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buf, *n), "sealed segment");
  auto past = (*f)->PRead(100, 8, buf);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(*past, 0u);
  EXPECT_TRUE((*f)->Sync().ok());  // nothing unsynced
  EXPECT_EQ((*f)->Append("x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*f)->Truncate(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*f)->Size(), 21u);
}

}  // namespace
}  // namespace tokimq
