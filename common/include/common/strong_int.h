// StrongOffset<Tag>: an int64_t position in one kind of sequence, with its own type so that
// positions of different sequences do not mix (Redpanda's strongly typed offsets). The three
// the storage uses are in common/offsets.h.
//
// What it allows is the arithmetic of positions: position + distance -> position,
// position - distance -> position, position - position -> distance (a plain int64_t: bytes or
// entries, as the sequence counts), comparison, and ++/-- (next/previous entry). It does not
// convert from or to an integer implicitly (construct with an explicit value, read .value()),
// nor to a position of another sequence, and two positions do not add.
//
// Units: those of the sequence (see each alias). -1 is the usual "none" value (kNone()).
// Thread-safety: a value type; as an int64_t.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>

#include "fmt/format.h"

namespace tokimq {

template <typename Tag>
class StrongOffset {
 public:
  constexpr StrongOffset() = default;  // 0
  constexpr explicit StrongOffset(int64_t value) : value_(value) {}
  // -1: no position (an unset field, a missing link).
  static constexpr StrongOffset kNone() { return StrongOffset(-1); }

  constexpr int64_t value() const { return value_; }

  friend constexpr bool operator==(StrongOffset, StrongOffset) = default;
  friend constexpr auto operator<=>(StrongOffset, StrongOffset) = default;

  friend constexpr StrongOffset operator+(StrongOffset a, int64_t distance) {
    return StrongOffset(a.value_ + distance);
  }
  friend constexpr StrongOffset operator-(StrongOffset a, int64_t distance) {
    return StrongOffset(a.value_ - distance);
  }
  friend constexpr int64_t operator-(StrongOffset a, StrongOffset b) { return a.value_ - b.value_; }
  constexpr StrongOffset& operator+=(int64_t distance) {
    value_ += distance;
    return *this;
  }
  constexpr StrongOffset& operator-=(int64_t distance) {
    value_ -= distance;
    return *this;
  }
  constexpr StrongOffset& operator++() {
    ++value_;
    return *this;
  }
  constexpr StrongOffset operator++(int) { return StrongOffset(value_++); }
  constexpr StrongOffset& operator--() {
    --value_;
    return *this;
  }

  friend std::ostream& operator<<(std::ostream& os, StrongOffset o) { return os << o.value_; }

 private:
  int64_t value_ = 0;
};

}  // namespace tokimq

template <typename Tag>
struct std::hash<tokimq::StrongOffset<Tag>> {
  size_t operator()(tokimq::StrongOffset<Tag> o) const noexcept {
    return std::hash<int64_t>()(o.value());
  }
};

// Formats as the number ("{}" in logs and error texts).
template <typename Tag>
struct fmt::formatter<tokimq::StrongOffset<Tag>> : fmt::formatter<int64_t> {
  template <typename FormatContext>
  auto format(tokimq::StrongOffset<Tag> o, FormatContext& ctx) const {
    return fmt::formatter<int64_t>::format(o.value(), ctx);
  }
};
