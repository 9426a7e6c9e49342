// StrongOffset (common/strong_int.h) and the storage's three positions (common/offsets.h).
#include "common/strong_int.h"

#include <gtest/gtest.h>

#include <sstream>
#include <type_traits>
#include <unordered_set>

#include "common/offsets.h"
#include "fmt/format.h"

namespace tokimq {
namespace {

// Compile-time facts: no implicit conversion between the three, nor from or to int64_t.
static_assert(!std::is_convertible_v<QueueOffset, PhysicalOffset>);
static_assert(!std::is_convertible_v<PhysicalOffset, QueueOffset>);
static_assert(!std::is_convertible_v<TimerLogPosition, PhysicalOffset>);
static_assert(!std::is_constructible_v<PhysicalOffset, QueueOffset>);
static_assert(!std::is_convertible_v<int64_t, PhysicalOffset>);
static_assert(!std::is_convertible_v<PhysicalOffset, int64_t>);
static_assert(std::is_constructible_v<PhysicalOffset, int64_t>);  // explicitly
static_assert(std::is_trivially_copyable_v<QueueOffset> && sizeof(QueueOffset) == 8);

// Only position arithmetic: no position + position, no mixing sequences in a difference or a
// comparison, no multiplication.
template <typename A, typename B>
concept Addable = requires(A a, B b) { a + b; };
template <typename A, typename B>
concept Subtractable = requires(A a, B b) { a - b; };
template <typename A, typename B>
concept Comparable = requires(A a, B b) { a < b; };
template <typename A, typename B>
concept Multipliable = requires(A a, B b) { a * b; };
static_assert(Addable<PhysicalOffset, int64_t>);
static_assert(!Addable<PhysicalOffset, PhysicalOffset>);
static_assert(!Addable<PhysicalOffset, QueueOffset>);
static_assert(Subtractable<QueueOffset, QueueOffset>);
static_assert(!Subtractable<QueueOffset, PhysicalOffset>);
static_assert(!Comparable<QueueOffset, PhysicalOffset>);
static_assert(!Comparable<QueueOffset, int64_t>);
static_assert(!Multipliable<QueueOffset, int64_t>);
static_assert(std::is_same_v<decltype(PhysicalOffset(1) + 2), PhysicalOffset>);
static_assert(std::is_same_v<decltype(PhysicalOffset(5) - PhysicalOffset(2)), int64_t>);

TEST(StrongOffset, PositionPlusDistanceIsAPositionAndTheDifferenceADistance) {
  const PhysicalOffset record(4096);
  const PhysicalOffset end = record + 217;  // a 217-byte record
  EXPECT_EQ(end.value(), 4313);
  EXPECT_EQ(end - record, 217);
  EXPECT_EQ((end - 17).value(), 4296);
  PhysicalOffset p = record;
  p += 100;
  p -= 30;
  EXPECT_EQ(p, PhysicalOffset(4166));
}

TEST(StrongOffset, QueueOffsetsStepByOneEntry) {
  QueueOffset q(41);
  EXPECT_EQ((++q).value(), 42);
  EXPECT_EQ((q++).value(), 42);
  EXPECT_EQ(q.value(), 43);
  EXPECT_EQ((--q).value(), 42);
  EXPECT_EQ(QueueOffset(1000) - QueueOffset(958), 42);  // entries between two offsets
}

TEST(StrongOffset, OrdersAsItsValueAndDefaultsToZero) {
  EXPECT_LT(TimerLogPosition(72), TimerLogPosition(144));
  EXPECT_GT(TimerLogPosition(0), TimerLogPosition::kNone());
  EXPECT_EQ(TimerLogPosition::kNone().value(), -1);
  EXPECT_EQ(TimerLogPosition().value(), 0);
  EXPECT_NE(QueueOffset(3), QueueOffset(4));
}

TEST(StrongOffset, FormatsPrintsAndHashesAsItsNumber) {
  EXPECT_EQ(fmt::format("offset {} at {:>6}", PhysicalOffset(123), QueueOffset(7)),
            "offset 123 at      7");
  std::ostringstream os;
  os << TimerLogPosition(-1);
  EXPECT_EQ(os.str(), "-1");
  std::unordered_set<QueueOffset> seen{QueueOffset(1), QueueOffset(2), QueueOffset(1)};
  EXPECT_EQ(seen.size(), 2u);
}

}  // namespace
}  // namespace tokimq
