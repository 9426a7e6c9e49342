// Property tests: random batches through the real executor, every handler call stamped with a
// logical clock on entry and exit, then the ordering guarantees checked against the stamps.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "client/ordering/executor.h"
#include "ordering/ordering_test_util.h"

namespace tokimq::ordering {
namespace {

using O = EventAtomicOrdering;
using ::tokimq::ordering::testing::RandomBatch;

struct Event {
  size_t index;
};

struct Stamp {
  bool handed = false;
  bool ok = false;
  size_t call = 0;
  size_t pos = 0;
  uint64_t start = 0;
  uint64_t end = 0;
};

// Shared by the executors of the test; reset per batch. Thread-safe.
struct Probe {
  std::mutex mu;
  std::atomic<uint64_t> clock{0};
  std::vector<Stamp> stamps;
  std::set<size_t> fail_first;  // a call whose first record is here fails
  size_t max_batch = 0;
  size_t calls = 0;
  bool bad_call = false;  // a call mixing keys/types or over max_batch

  absl::Status Handle(const HandlerCall<Event>& c) {
    const uint64_t start = clock.fetch_add(1);
    const bool ok = !fail_first.contains(c.events[0].records[0]);
    const uint64_t end = clock.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu);
    const size_t id = calls++;
    if (c.events.size() > max_batch || c.events.empty()) bad_call = true;
    for (size_t p = 0; p < c.events.size(); ++p) {
      if (c.events[p].records.size() != 1 || c.events[p].event.index != c.events[p].records[0]) {
        bad_call = true;  // pass-through types: one record per event
      }
      Stamp& s = stamps.at(c.events[p].records[0]);
      if (s.handed) bad_call = true;  // handed twice
      s = Stamp{true, ok, id, p, start, end};
    }
    return ok ? absl::OkStatus() : absl::AbortedError("injected");
  }
};

void CheckExecution(const std::vector<PlanRecord>& batch, const Plan& plan,
                    const ExecutionReport& report, Probe& probe, int iter) {
  const auto& st = probe.stamps;
  SCOPED_TRACE(::testing::Message() << "iteration " << iter << ": " << plan.DebugString());
  ASSERT_FALSE(probe.bad_call);
  ASSERT_EQ(report.outcomes.size(), batch.size());
  // Header of every handed record matches its call, checked through the plan's run tags.
  std::vector<int> stage(batch.size(), -1);
  std::map<uint64_t, std::vector<size_t>> key_records;
  for (size_t i = 0; i < batch.size(); ++i) key_records[batch[i].key].push_back(i);
  for (uint64_t key : plan.keys()) {
    auto segs = plan.segments(key);
    for (size_t s = 0; s < segs.size(); ++s) {
      auto mark = [&](RunId run, int k) {
        for (size_t r : plan.records(run)) stage[r] = static_cast<int>(s * 3) + k;
      };
      if (auto h = plan.head(segs[s])) mark(*h, 0);
      for (RunId r : plan.body(segs[s])) mark(r, 1);
      if (auto t = plan.tail(segs[s])) mark(*t, 2);
    }
  }
  // Done exactly when a successful handler call covered the record.
  for (size_t i = 0; i < batch.size(); ++i) {
    ASSERT_EQ(report.outcomes[i] == RecordOutcome::kDone, st[i].handed && st[i].ok) << i;
  }
  // Ordering: whenever j must follow i and j was handed, i finished OK before j started
  // (or they share a call, i first).
  for (size_t j = 0; j < batch.size(); ++j) {
    if (!st[j].handed) continue;
    for (size_t i = 0; i < j; ++i) {
      if (batch[i].key != batch[j].key) continue;
      const bool same_type = batch[i].tag == batch[j].tag;
      const bool i_acquires = batch[i].ordering == O::Acquire || batch[i].ordering == O::AcqRel;
      const bool j_releases = batch[j].ordering == O::Release || batch[j].ordering == O::AcqRel;
      if (!(same_type || i_acquires || j_releases)) continue;
      ASSERT_TRUE(st[i].handed) << i << " before " << j;
      if (st[i].call == st[j].call) {
        ASSERT_LT(st[i].pos, st[j].pos) << i << " before " << j;
      } else {
        ASSERT_TRUE(st[i].ok) << i << " before " << j;
        ASSERT_LT(st[i].end, st[j].start) << i << " before " << j;
      }
    }
  }
  // Tail runs start after every earlier event of their key finished; head runs finish before
  // any later event of their key starts.
  for (uint64_t key : plan.keys()) {
    for (SegmentId seg : plan.segments(key)) {
      if (auto t = plan.tail(seg)) {
        auto recs = plan.records(*t);
        const std::set<size_t> in_run(recs.begin(), recs.end());
        uint64_t first_start = UINT64_MAX;
        for (size_t r : recs) {
          if (st[r].handed) first_start = std::min(first_start, st[r].start);
        }
        if (first_start == UINT64_MAX) continue;
        for (size_t r : key_records[key]) {
          if (r >= recs.back() || in_run.contains(r)) continue;
          ASSERT_TRUE(st[r].handed && st[r].ok) << "tail started before " << r;
          ASSERT_LT(st[r].end, first_start) << "tail started before " << r << " finished";
        }
      }
      if (auto h = plan.head(seg)) {
        auto recs = plan.records(*h);
        const std::set<size_t> in_run(recs.begin(), recs.end());
        uint64_t last_end = 0;
        bool all_ok = true;
        for (size_t r : recs) {
          all_ok = all_ok && st[r].handed && st[r].ok;
          last_end = std::max(last_end, st[r].end);
        }
        for (size_t r : key_records[key]) {
          if (r <= recs.front() || in_run.contains(r) || !st[r].handed) continue;
          ASSERT_TRUE(all_ok) << r << " started though the head did not finish";
          ASSERT_GT(st[r].start, last_end) << r << " started before the head finished";
        }
      }
    }
  }
  // Failures stop only their key, from the failed stage on.
  std::set<uint64_t> failed_keys;
  for (const KeyFailure& f : report.failures) failed_keys.insert(f.key);
  for (const auto& [key, recs] : key_records) {
    int failed_stage = INT32_MAX;
    for (size_t r : recs) {
      if (st[r].handed && !st[r].ok) failed_stage = std::min(failed_stage, stage[r]);
    }
    ASSERT_EQ(failed_keys.contains(key), failed_stage != INT32_MAX) << "key " << key;
    for (size_t r : recs) {
      if (stage[r] < failed_stage) {
        ASSERT_EQ(report.outcomes[r], RecordOutcome::kDone) << r;
      } else if (stage[r] > failed_stage) {
        ASSERT_FALSE(st[r].handed) << r << " ran after its key failed";
        ASSERT_EQ(report.outcomes[r], RecordOutcome::kNotDone) << r;
      }
    }
  }
}

TEST(ExecutorPropertyTest, RandomBatchesKeepOrderAndReportExactOutcomes) {
  Probe probe;
  std::vector<std::unique_ptr<Executor<Event>>> executors;  // by max_batch - 1
  for (size_t mb = 1; mb <= 4; ++mb) {
    executors.push_back(std::make_unique<Executor<Event>>(
        ExecutorOptions{3, mb}, [&probe](const HandlerCall<Event>& c) { return probe.Handle(c); }));
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> mb_dist(1, 4);
  std::bernoulli_distribution inject(0.5);
  std::uniform_int_distribution<int> pct(0, 99);
  size_t failures = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const std::vector<PlanRecord> batch = RandomBatch(rng, 48, 4, 4);
    probe.stamps.assign(batch.size(), Stamp{});
    probe.fail_first.clear();
    probe.calls = 0;
    probe.max_batch = mb_dist(rng);
    if (inject(rng)) {
      for (size_t i = 0; i < batch.size(); ++i) {
        if (pct(rng) < 8) probe.fail_first.insert(i);
      }
    }
    const Plan plan = Plan::New(batch);
    const ExecutionReport report = executors[probe.max_batch - 1]->Execute(
        plan, [](size_t i) -> absl::StatusOr<Event> { return Event{i}; });
    failures += report.failures.size();
    CheckExecution(batch, plan, report, probe, iter);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(failures, 100u);  // the failure paths were exercised
}

}  // namespace
}  // namespace tokimq::ordering
