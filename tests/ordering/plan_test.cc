#include "client/ordering/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "ordering/ordering_test_util.h"

namespace tokimq::ordering {
namespace {

using O = EventAtomicOrdering;
using ::tokimq::ordering::testing::AccountBatch;
using ::tokimq::ordering::testing::RandomBatch;
using Indexes = std::vector<size_t>;

Indexes Recs(const Plan& plan, RunId run) {
  auto r = plan.records(run);
  return Indexes(r.begin(), r.end());
}

Indexes Recs(const Plan& plan, std::optional<RunId> run) {
  EXPECT_TRUE(run.has_value());
  if (!run) return {};
  return Recs(plan, *run);
}

PlanRecord R(uint64_t key, uint16_t tag, O o) { return PlanRecord{key, EventTypeTag{tag}, o}; }

TEST(PlanTest, WorkedExampleFromTheSeedHoldsExactly) {
  const std::vector<PlanRecord> batch = AccountBatch();
  const Plan plan = Plan::New(batch);

  ASSERT_EQ(std::vector<uint64_t>(plan.keys().begin(), plan.keys().end()),
            (std::vector<uint64_t>{42, 7}));

  // Account 7: one segment, one run [2].
  auto seg7 = plan.segments(7);
  ASSERT_EQ(seg7.size(), 1u);
  EXPECT_FALSE(plan.head(seg7[0]).has_value());
  EXPECT_FALSE(plan.tail(seg7[0]).has_value());
  ASSERT_EQ(plan.body(seg7[0]).size(), 1u);
  EXPECT_EQ(Recs(plan, plan.body(seg7[0])[0]), (Indexes{2}));

  // Account 42, segment 1: head [0]; body [1,4] then [3]; tail [5].
  auto seg42 = plan.segments(42);
  ASSERT_EQ(seg42.size(), 2u);
  EXPECT_EQ(Recs(plan, plan.head(seg42[0])), (Indexes{0}));
  ASSERT_EQ(plan.body(seg42[0]).size(), 2u);
  EXPECT_EQ(Recs(plan, plan.body(seg42[0])[0]), (Indexes{1, 4}));
  EXPECT_EQ(Recs(plan, plan.body(seg42[0])[1]), (Indexes{3}));
  EXPECT_EQ(Recs(plan, plan.tail(seg42[0])), (Indexes{5}));
  EXPECT_EQ(plan.tag(*plan.head(seg42[0])), EventTypeTag{1});
  EXPECT_EQ(plan.tag(plan.body(seg42[0])[0]), EventTypeTag{2});
  EXPECT_EQ(plan.tag(plan.body(seg42[0])[1]), EventTypeTag{3});
  EXPECT_EQ(plan.tag(*plan.tail(seg42[0])), EventTypeTag{4});

  // Segment 2: head [6]; one body run [7]; no tail.
  EXPECT_EQ(Recs(plan, plan.head(seg42[1])), (Indexes{6}));
  ASSERT_EQ(plan.body(seg42[1]).size(), 1u);
  EXPECT_EQ(Recs(plan, plan.body(seg42[1])[0]), (Indexes{7}));
  EXPECT_FALSE(plan.tail(seg42[1]).has_value());

  EXPECT_EQ(plan.key(plan.body(seg7[0])[0]), 7u);
  EXPECT_EQ(plan.key(*plan.tail(seg42[0])), 42u);
  EXPECT_EQ(plan.record_count(), 8u);
  EXPECT_EQ(plan.segment_count(), 3u);
  EXPECT_EQ(plan.run_count(), 7u);
  EXPECT_EQ(plan.DebugString(),
            "key 42: seg{head[0] body[1,4][3] tail[5]} seg{head[6] body[7]}; key 7: seg{body[2]}");
}

TEST(PlanTest, UnknownKeyHasNoSegments) {
  const std::vector<PlanRecord> batch = AccountBatch();
  EXPECT_TRUE(Plan::New(batch).segments(99).empty());
}

TEST(PlanTest, EmptyBatchGivesEmptyPlan) {
  const Plan plan = Plan::New({});
  EXPECT_TRUE(plan.keys().empty());
  EXPECT_EQ(plan.segment_count(), 0u);
  EXPECT_EQ(plan.DebugString(), "");
}

TEST(PlanTest, ReleaseOfTheHeadTypeWithOtherTypesFormsItsOwnSegment) {
  // Opened(A) Acquire, Deposited Relaxed, Opened Release: one run cannot be first and last.
  const std::vector<PlanRecord> batch = {R(1, 1, O::Acquire), R(1, 2, O::Relaxed),
                                         R(1, 1, O::Release), R(1, 2, O::Relaxed)};
  const Plan plan = Plan::New(batch);
  EXPECT_EQ(plan.DebugString(), "key 1: seg{head[0] body[1]} seg{tail[2]} seg{body[3]}");
}

TEST(PlanTest, ReleaseOfTheOnlyTypeJoinsTheHeadRun) {
  const std::vector<PlanRecord> batch = {R(1, 1, O::Acquire), R(1, 1, O::Relaxed),
                                         R(1, 1, O::Release), R(1, 2, O::Relaxed)};
  EXPECT_EQ(Plan::New(batch).DebugString(), "key 1: seg{head[0,1,2]} seg{body[3]}");
}

TEST(PlanTest, ReleaseTakesEarlierRelaxedEventsOfItsTypeIntoTheTail) {
  // A Relaxed event may pass events of other types, never one of its own type.
  const std::vector<PlanRecord> batch = {R(1, 2, O::Relaxed), R(1, 3, O::Relaxed),
                                         R(1, 2, O::Release)};
  EXPECT_EQ(Plan::New(batch).DebugString(), "key 1: seg{body[1] tail[0,2]}");
}

TEST(PlanTest, AcqRelIsAFullBarrier) {
  const std::vector<PlanRecord> batch = {R(1, 2, O::Relaxed), R(1, 3, O::Relaxed),
                                         R(1, 5, O::AcqRel), R(1, 2, O::Relaxed),
                                         R(1, 5, O::Relaxed)};
  EXPECT_EQ(Plan::New(batch).DebugString(), "key 1: seg{body[0][1]} seg{head[2,4] body[3]}");
}

TEST(PlanTest, ConsecutiveAcquiresEachStartASegment) {
  const std::vector<PlanRecord> batch = {R(1, 1, O::Acquire), R(1, 1, O::Acquire),
                                         R(1, 2, O::Acquire)};
  EXPECT_EQ(Plan::New(batch).DebugString(), "key 1: seg{head[0]} seg{head[1]} seg{head[2]}");
}

TEST(PlanTest, ReleaseOnAnEmptySegmentIsALoneTail) {
  const std::vector<PlanRecord> batch = {R(1, 4, O::Release), R(1, 4, O::Release)};
  EXPECT_EQ(Plan::New(batch).DebugString(), "key 1: seg{tail[0]} seg{tail[1]}");
}

TEST(PlanTest, SameTypeUnderDifferentOrderingsPerMessage) {
  // Account status: reactivated = Relaxed, frozen = AcqRel, closed = Release (tag 9).
  const std::vector<PlanRecord> batch = {R(5, 9, O::Relaxed), R(5, 2, O::Relaxed),
                                         R(5, 9, O::AcqRel), R(5, 2, O::Relaxed),
                                         R(5, 9, O::Release)};
  EXPECT_EQ(Plan::New(batch).DebugString(),
            "key 5: seg{body[0][1]} seg{head[2] body[3]} seg{tail[4]}");
}

// Property test on random batches: the plan partitions the batch and its stage order honours
// every guarantee of the model, checked directly against the declared orderings.
TEST(PlanTest, RandomBatchesKeepEveryGuarantee) {
  std::mt19937 rng(20240607);
  for (int iter = 0; iter < 4000; ++iter) {
    const std::vector<PlanRecord> batch = RandomBatch(rng, 64, 4, 4);
    const Plan plan = Plan::New(batch);

    // Position of every record: (segment, stage, position in run) and its run.
    struct Pos {
      size_t seg = 0;
      int stage = -1;
      size_t in_run = 0;
      uint32_t run = UINT32_MAX;
    };
    std::vector<Pos> pos(batch.size());
    size_t seen = 0;
    std::vector<uint64_t> first_keys;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (std::find(first_keys.begin(), first_keys.end(), batch[i].key) == first_keys.end()) {
        first_keys.push_back(batch[i].key);
      }
    }
    ASSERT_EQ(std::vector<uint64_t>(plan.keys().begin(), plan.keys().end()), first_keys);
    for (uint64_t key : plan.keys()) {
      auto segs = plan.segments(key);
      for (size_t s = 0; s < segs.size(); ++s) {
        auto place = [&](RunId run, int stage) {
          auto recs = plan.records(run);
          ASSERT_FALSE(recs.empty());
          ASSERT_TRUE(std::is_sorted(recs.begin(), recs.end()));
          for (size_t p = 0; p < recs.size(); ++p) {
            ASSERT_LT(recs[p], batch.size());
            ASSERT_EQ(pos[recs[p]].stage, -1) << "record in two runs";
            ASSERT_EQ(batch[recs[p]].key, key);
            ASSERT_EQ(batch[recs[p]].tag, plan.tag(run));
            pos[recs[p]] = Pos{s, stage, p, run.value};
            ++seen;
          }
        };
        bool any = false;
        if (auto h = plan.head(segs[s])) {
          place(*h, 0);
          any = true;
        }
        std::vector<EventTypeTag> tags;
        for (RunId r : plan.body(segs[s])) {
          place(r, 1);
          any = true;
          tags.push_back(plan.tag(r));
        }
        if (auto t = plan.tail(segs[s])) {
          place(*t, 2);
          any = true;
        }
        ASSERT_TRUE(any) << "empty segment";
        if (auto h = plan.head(segs[s])) tags.push_back(plan.tag(*h));
        if (auto t = plan.tail(segs[s])) tags.push_back(plan.tag(*t));
        std::sort(tags.begin(), tags.end());
        ASSERT_TRUE(std::adjacent_find(tags.begin(), tags.end()) == tags.end())
            << "one type has two runs in a segment";
      }
    }
    ASSERT_EQ(seen, batch.size());

    // i happens before j in the plan: same run earlier, or an earlier stage of the key.
    auto before = [&](size_t i, size_t j) {
      if (pos[i].run == pos[j].run) return pos[i].in_run < pos[j].in_run;
      return std::tie(pos[i].seg, pos[i].stage) < std::tie(pos[j].seg, pos[j].stage);
    };
    for (size_t j = 0; j < batch.size(); ++j) {
      for (size_t i = 0; i < j; ++i) {
        if (batch[i].key != batch[j].key) continue;
        const bool same_type = batch[i].tag == batch[j].tag;
        const bool i_acquires = batch[i].ordering == O::Acquire || batch[i].ordering == O::AcqRel;
        const bool j_releases = batch[j].ordering == O::Release || batch[j].ordering == O::AcqRel;
        if (same_type || i_acquires || j_releases) {
          ASSERT_TRUE(before(i, j))
              << "records " << i << " and " << j << " in " << plan.DebugString();
        }
      }
    }
  }
}

}  // namespace
}  // namespace tokimq::ordering
