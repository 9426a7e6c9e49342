// Batches shared by the ordering tests.
#pragma once

#include <random>
#include <vector>

#include "client/ordering/plan.h"

namespace tokimq::ordering::testing {

// Account tags of the worked example (cases/ordering.md).
inline constexpr EventTypeTag kOpened{1};
inline constexpr EventTypeTag kDeposited{2};
inline constexpr EventTypeTag kWithdrawn{3};
inline constexpr EventTypeTag kClosed{4};

// The worked example's batch, in log order.
inline std::vector<PlanRecord> AccountBatch() {
  using O = EventAtomicOrdering;
  return {
      {42, kOpened, O::Acquire},    {42, kDeposited, O::Relaxed}, {7, kDeposited, O::Relaxed},
      {42, kWithdrawn, O::Relaxed}, {42, kDeposited, O::Relaxed}, {42, kClosed, O::Release},
      {42, kOpened, O::Acquire},    {42, kDeposited, O::Relaxed},
  };
}

// A batch of 0..max_size records over `keys` keys and `tags` tags; orderings mostly Relaxed so
// runs get long, with enough fences to make many segments.
inline std::vector<PlanRecord> RandomBatch(std::mt19937& rng, size_t max_size, uint64_t keys,
                                           uint16_t tags) {
  std::uniform_int_distribution<size_t> size_dist(0, max_size);
  std::uniform_int_distribution<uint64_t> key_dist(1, keys);
  std::uniform_int_distribution<int> tag_dist(1, tags);
  std::uniform_int_distribution<int> mode_dist(0, 9);
  std::vector<PlanRecord> batch(size_dist(rng));
  for (PlanRecord& r : batch) {
    r.key = key_dist(rng) * 1000003;
    r.tag = EventTypeTag{static_cast<uint16_t>(tag_dist(rng))};
    const int m = mode_dist(rng);
    r.ordering = m < 6   ? EventAtomicOrdering::Relaxed
                 : m < 7 ? EventAtomicOrdering::Acquire
                 : m < 9 ? EventAtomicOrdering::Release
                         : EventAtomicOrdering::AcqRel;
  }
  return batch;
}

}  // namespace tokimq::ordering::testing
