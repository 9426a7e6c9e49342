// The recall handle text against docs/formats/recall-handle.md.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <string_view>

#include "common/crc32c.h"
#include "timerstore/recall_handle.h"

namespace tokimq {
namespace {

constexpr char kDocHandle[] = "0100100000000000006052e6cf8b010000369e9f83d3fdb05c";

TEST(RecallHandleFormat, MatchesTheWorkedExampleOfTheFormatDoc) {
  const uint32_t id_crc = crc32c::Value(std::string_view("0190a3e2b5c001a2b3c400000007"));
  EXPECT_EQ(id_crc, 0x839f9e36u);
  EXPECT_EQ((RecallHandle{PhysicalOffset(4096), 1'700'000'060'000, id_crc}.Encode()), kDocHandle);
  auto d = RecallHandle::Decode(kDocHandle);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->physical_offset, PhysicalOffset(4096));
  EXPECT_EQ(d->deliver_ms, 1'700'000'060'000);
  EXPECT_EQ(d->id_crc, 0x839f9e36u);
}

TEST(RecallHandleFormat, UppercaseDecodesToTheSameHandle) {
  std::string upper = kDocHandle;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto d = RecallHandle::Decode(upper);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->Encode(), kDocHandle);
}

TEST(RecallHandleFormat, UnknownVersionIsInvalidAndABadCheckIsNotFound) {
  std::string v2 = kDocHandle;
  v2[1] = '2';
  EXPECT_EQ(RecallHandle::Decode(v2).status().code(), absl::StatusCode::kInvalidArgument);
  std::string bad_check = kDocHandle;
  bad_check[49] = bad_check[49] == 'c' ? 'd' : 'c';
  EXPECT_EQ(RecallHandle::Decode(bad_check).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(RecallHandle::Decode(std::string(kDocHandle) + "00").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tokimq
