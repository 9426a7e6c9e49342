#include "client/ordering/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "ordering/ordering_test_util.h"

namespace tokimq::ordering {
namespace {

using O = EventAtomicOrdering;
using ::tokimq::ordering::testing::AccountBatch;
using ::tokimq::ordering::testing::kClosed;
using ::tokimq::ordering::testing::kDeposited;
using ::tokimq::ordering::testing::kOpened;
using ::tokimq::ordering::testing::kWithdrawn;
using ::tokimq::ordering::testing::RandomBatch;
using Indexes = std::vector<size_t>;

// Deadlock guard only: generous, never reached when the code is right.
constexpr auto kGuard = std::chrono::seconds(60);

struct AccountEvent {
  size_t index;    // batch index it was decoded from
  int64_t amount;  // deposits: amount; merged deposits: the sum
};

// One handler call as the handler saw it, stamped with a logical clock on entry and exit.
struct Call {
  uint64_t key;
  EventTypeTag tag;
  std::vector<Indexes> events;  // records of each reduced event
  std::vector<int64_t> amounts;
  uint64_t start;
  uint64_t end;
  bool ok;
};

// Records every handler call; thread-safe. `fail` decides which calls fail.
class Recorder {
 public:
  std::function<bool(const HandlerCall<AccountEvent>&)> fail;

  absl::Status Handle(const HandlerCall<AccountEvent>& call) {
    Call c;
    c.start = clock_.fetch_add(1);
    c.key = call.key;
    c.tag = call.tag;
    for (const auto& e : call.events) {
      c.events.push_back(e.records);
      c.amounts.push_back(e.event.amount);
    }
    c.ok = !(fail && fail(call));
    c.end = clock_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(c));
    return calls_.back().ok ? absl::OkStatus() : absl::UnavailableError("injected");
  }

  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    auto out = calls_;
    std::sort(out.begin(), out.end(),
              [](const Call& a, const Call& b) { return a.start < b.start; });
    return out;
  }

 private:
  std::atomic<uint64_t> clock_{0};
  mutable std::mutex mu_;
  std::vector<Call> calls_;
};

std::function<absl::StatusOr<AccountEvent>(size_t)> DecodeAmounts(std::vector<int64_t> amounts) {
  return [amounts = std::move(amounts)](size_t i) -> absl::StatusOr<AccountEvent> {
    return AccountEvent{i, amounts.at(i)};
  };
}

TypeAlgebra<AccountEvent> SumDeposits() {
  return {[](AccountEvent& acc, const AccountEvent& next) {
    acc.amount += next.amount;
    return true;
  }};
}

Executor<AccountEvent> MakeExecutor(Recorder& rec, size_t threads, size_t max_batch) {
  return Executor<AccountEvent>(
      ExecutorOptions{threads, max_batch},
      [&rec](const HandlerCall<AccountEvent>& c) { return rec.Handle(c); });
}

std::vector<Call> CallsOf(const std::vector<Call>& calls, uint64_t key) {
  std::vector<Call> out;
  for (const Call& c : calls) {
    if (c.key == key) out.push_back(c);
  }
  return out;
}

TEST(ExecutorTest, WorkedExampleRunsStageByStageAndSumsDeposits) {
  Recorder rec;
  auto exec = MakeExecutor(rec, 4, 64);
  exec.RegisterType(kDeposited, SumDeposits());
  const auto batch = AccountBatch();
  const auto report = exec.Execute(batch, DecodeAmounts({0, 10, 5, 3, 20, 0, 0, 7}));
  EXPECT_TRUE(report.all_done());
  EXPECT_EQ(report.done(), (Indexes{0, 1, 2, 3, 4, 5, 6, 7}));

  const auto calls = rec.calls();
  const auto k7 = CallsOf(calls, 7);
  ASSERT_EQ(k7.size(), 1u);
  EXPECT_EQ(k7[0].tag, kDeposited);
  EXPECT_EQ(k7[0].events, (std::vector<Indexes>{{2}}));

  const auto k42 = CallsOf(calls, 42);
  ASSERT_EQ(k42.size(), 6u);
  // Stage order: head [0]; body {[1,4] merged, [3]} in either order; tail [5]; head [6]; [7].
  EXPECT_EQ(k42[0].tag, kOpened);
  EXPECT_EQ(k42[0].events, (std::vector<Indexes>{{0}}));
  std::set<EventTypeTag> body_tags = {k42[1].tag, k42[2].tag};
  EXPECT_EQ(body_tags, (std::set<EventTypeTag>{kDeposited, kWithdrawn}));
  for (int b : {1, 2}) {
    EXPECT_GT(k42[b].start, k42[0].end);
    EXPECT_LT(k42[b].end, k42[3].start);
    if (k42[b].tag == kDeposited) {
      EXPECT_EQ(k42[b].events, (std::vector<Indexes>{{1, 4}}));  // one merged event
      EXPECT_EQ(k42[b].amounts, (std::vector<int64_t>{30}));
    } else {
      EXPECT_EQ(k42[b].events, (std::vector<Indexes>{{3}}));
    }
  }
  EXPECT_EQ(k42[3].tag, kClosed);
  EXPECT_EQ(k42[3].events, (std::vector<Indexes>{{5}}));
  EXPECT_EQ(k42[4].events, (std::vector<Indexes>{{6}}));
  EXPECT_GT(k42[4].start, k42[3].end);
  EXPECT_EQ(k42[5].events, (std::vector<Indexes>{{7}}));
  EXPECT_EQ(k42[5].amounts, (std::vector<int64_t>{7}));
  EXPECT_GT(k42[5].start, k42[4].end);
}

TEST(ExecutorTest, ChunksNeverExceedMaxBatchAndKeepLogOrder) {
  Recorder rec;
  auto exec = MakeExecutor(rec, 2, 3);
  std::vector<PlanRecord> batch(10, PlanRecord{5, kWithdrawn, O::Relaxed});
  const auto report = exec.Execute(batch, DecodeAmounts(std::vector<int64_t>(10, 1)));
  EXPECT_TRUE(report.all_done());
  const auto calls = rec.calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0].events, (std::vector<Indexes>{{0}, {1}, {2}}));
  EXPECT_EQ(calls[1].events, (std::vector<Indexes>{{3}, {4}, {5}}));
  EXPECT_EQ(calls[2].events, (std::vector<Indexes>{{6}, {7}, {8}}));
  EXPECT_EQ(calls[3].events, (std::vector<Indexes>{{9}}));
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GT(calls[i].start, calls[i - 1].end);
}

TEST(ExecutorTest, AssociativeTypeMergesOnlyWhatCombineAccepts) {
  Recorder rec;
  auto exec = MakeExecutor(rec, 2, 2);
  // Merge while the sum stays <= 100.
  exec.RegisterType(kDeposited, {[](AccountEvent& acc, const AccountEvent& next) {
                      if (acc.amount + next.amount > 100) return false;
                      acc.amount += next.amount;
                      return true;
                    }});
  std::vector<PlanRecord> batch(6, PlanRecord{9, kDeposited, O::Relaxed});
  const auto report = exec.Execute(batch, DecodeAmounts({60, 30, 20, 90, 5, 5}));
  EXPECT_TRUE(report.all_done());
  const auto calls = rec.calls();
  // Reduced: [0,1]=90, [2]=20, [3,4,5]=100; chunked by max_batch 2 after reduction.
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].events, (std::vector<Indexes>{{0, 1}, {2}}));
  EXPECT_EQ(calls[0].amounts, (std::vector<int64_t>{90, 20}));
  EXPECT_EQ(calls[1].events, (std::vector<Indexes>{{3, 4, 5}}));
  EXPECT_EQ(calls[1].amounts, (std::vector<int64_t>{100}));
}

TEST(ExecutorTest, UnregisteredTypeIsPassedThrough) {
  Recorder rec;
  auto exec = MakeExecutor(rec, 1, 64);
  std::vector<PlanRecord> batch(3, PlanRecord{9, kDeposited, O::Relaxed});
  exec.Execute(batch, DecodeAmounts({1, 2, 3}));
  const auto calls = rec.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].amounts, (std::vector<int64_t>{1, 2, 3}));
}

// Fails the handler call whose first record is `index`.
std::function<bool(const HandlerCall<AccountEvent>&)> FailAt(size_t index) {
  return [index](const HandlerCall<AccountEvent>& c) { return c.events[0].records[0] == index; };
}

TEST(ExecutorTest, FailedStageStopsOnlyThatKeyFromThatStageOn) {
  for (auto [fail_at, want_not_done] : std::vector<std::pair<size_t, Indexes>>{
           {0, {0, 1, 3, 4, 5, 6, 7}}, {5, {5, 6, 7}}, {6, {6, 7}}, {7, {7}}}) {
    Recorder rec;
    rec.fail = FailAt(fail_at);
    auto exec = MakeExecutor(rec, 3, 64);
    exec.RegisterType(kDeposited, SumDeposits());
    const auto report = exec.Execute(AccountBatch(), DecodeAmounts({0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(report.not_done(), want_not_done) << "failing at " << fail_at;
    ASSERT_EQ(report.failures.size(), 1u);
    EXPECT_EQ(report.failures[0].key, 42u);
    EXPECT_TRUE(absl::IsUnavailable(report.failures[0].status));
    EXPECT_EQ(report.outcomes[2], RecordOutcome::kDone);  // account 7 went on
    // The only call of key 42 touching a not-done record is the failed one itself.
    const std::set<size_t> not_done(want_not_done.begin(), want_not_done.end());
    for (const Call& c : CallsOf(rec.calls(), 42)) {
      for (const auto& e : c.events) {
        for (size_t r : e) {
          if (not_done.contains(r)) {
            EXPECT_FALSE(c.ok);
            EXPECT_EQ(c.events[0][0], fail_at);
          }
        }
      }
    }
  }
}

TEST(ExecutorTest, FailedBodyRunKeepsFinishedSiblingsDoneAndStopsTheRest) {
  Recorder rec;
  rec.fail = FailAt(3);  // the withdrawal, concurrent with the deposits [1,4]
  auto exec = MakeExecutor(rec, 3, 64);
  const auto report = exec.Execute(AccountBatch(), DecodeAmounts({0, 1, 2, 3, 4, 5, 6, 7}));
  std::set<size_t> handled_ok;
  for (const Call& c : rec.calls()) {
    for (const auto& e : c.events) {
      if (c.ok) handled_ok.insert(e.begin(), e.end());
    }
    if (c.key == 42) {
      for (const auto& e : c.events) EXPECT_LT(e[0], 5u) << "handled past the failed stage";
    }
  }
  // Done is exactly what a successful handler call covered: ACK those, retry the rest.
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(report.outcomes[i] == RecordOutcome::kDone, handled_ok.contains(i)) << i;
  }
  EXPECT_TRUE(handled_ok.contains(0));
  EXPECT_TRUE(handled_ok.contains(2));
  for (size_t i : {3, 5, 6, 7}) EXPECT_EQ(report.outcomes[i], RecordOutcome::kNotDone) << i;
}

TEST(ExecutorTest, DecodeFailureFailsTheRunBeforeAnyHandlerCall) {
  Recorder rec;
  auto exec = MakeExecutor(rec, 2, 1);
  std::vector<PlanRecord> batch = {
      {1, kDeposited, O::Relaxed}, {1, kDeposited, O::Relaxed}, {2, kDeposited, O::Relaxed}};
  const auto report = exec.Execute(batch, [](size_t i) -> absl::StatusOr<AccountEvent> {
    if (i == 1) return absl::DataLossError("bad body");
    return AccountEvent{i, 1};
  });
  EXPECT_EQ(report.not_done(), (Indexes{0, 1}));
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].key, 1u);
  EXPECT_TRUE(absl::IsDataLoss(report.failures[0].status));
  ASSERT_EQ(rec.calls().size(), 1u);
  EXPECT_EQ(rec.calls()[0].key, 2u);
}

TEST(ExecutorTest, ThrowingHandlerBecomesAnInternalErrorForThatKey) {
  Executor<AccountEvent> exec(ExecutorOptions{2, 8}, [](const HandlerCall<AccountEvent>& c) {
    if (c.key == 1) throw std::runtime_error("boom");
    return absl::OkStatus();
  });
  std::vector<PlanRecord> batch = {{1, kDeposited, O::Relaxed}, {2, kDeposited, O::Relaxed}};
  const auto report = exec.Execute(batch, DecodeAmounts({1, 1}));
  EXPECT_EQ(report.not_done(), (Indexes{0}));
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_TRUE(absl::IsInternal(report.failures[0].status));
}

TEST(ExecutorTest, EmptyBatchReturnsAtOnce) {
  Recorder rec;
  auto exec = MakeExecutor(rec, 2, 8);
  const auto report = exec.Execute(std::span<const PlanRecord>{}, DecodeAmounts({}));
  EXPECT_TRUE(report.outcomes.empty());
  EXPECT_TRUE(report.all_done());
}

// Key A's only handler blocks until key B has gone through all three of its segments. If keys
// waited on each other (e.g. B queued behind A, or a worker blocked per key), this would hang;
// the bounded wait turns a hang into a failure.
TEST(ExecutorTest, DifferentKeysNeverWaitOnEachOther) {
  std::mutex mu;
  std::condition_variable cv;
  bool b_closed = false;
  Executor<AccountEvent> exec(ExecutorOptions{2, 8},
                              [&](const HandlerCall<AccountEvent>& call) -> absl::Status {
                                std::unique_lock<std::mutex> lock(mu);
                                if (call.key == 1) {
                                  if (!cv.wait_for(lock, kGuard, [&] { return b_closed; })) {
                                    return absl::DeadlineExceededError("key B never ran");
                                  }
                                } else if (call.tag == kClosed) {
                                  b_closed = true;
                                  cv.notify_all();
                                }
                                return absl::OkStatus();
                              });
  const std::vector<PlanRecord> batch = {{1, kDeposited, O::Relaxed},
                                         {2, kOpened, O::Acquire},
                                         {2, kDeposited, O::Relaxed},
                                         {2, kOpened, O::AcqRel},
                                         {2, kClosed, O::Release}};
  const auto report = exec.Execute(batch, DecodeAmounts({1, 0, 1, 0, 0}));
  EXPECT_TRUE(report.all_done()) << (report.failures.empty()
                                         ? ""
                                         : report.failures[0].status.ToString());
}

}  // namespace
}  // namespace tokimq::ordering
