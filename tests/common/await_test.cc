// AwaitTrue (tests/support/await.h), the bounded wait of the real-process tests. These checks
// never sleep: a zero poll interval or a zero timeout.
#include "support/await.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace tokimq::testing {
namespace {

using std::chrono::milliseconds;

TEST(AwaitTrueTest, SucceedsAtTheFirstCallThatHoldsAndCallsNoMore) {
  int calls = 0;
  ::testing::AssertionResult r =
      AwaitTrue([&] { return ++calls == 3; }, std::chrono::seconds(60), "the third call",
                milliseconds(0));
  EXPECT_TRUE(r);
  EXPECT_EQ(calls, 3);
}

TEST(AwaitTrueTest, FailsNamingWhatItAwaitedAndTheTimeout) {
  int calls = 0;
  ::testing::AssertionResult r = AwaitTrue(
      [&] {
        ++calls;
        return false;
      },
      milliseconds(0), "3 registered members", milliseconds(0));
  EXPECT_FALSE(r);
  EXPECT_EQ(std::string(r.message()), "timed out after 0 ms waiting for 3 registered members");
  EXPECT_EQ(calls, 1);  // the last look at the deadline
}

TEST(AwaitTrueTest, ALastCallAtTheDeadlineThatHoldsIsASuccess) {
  int calls = 0;
  EXPECT_TRUE(AwaitTrue([&] { return ++calls == 1; }, milliseconds(0), "x", milliseconds(0)));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tokimq::testing
