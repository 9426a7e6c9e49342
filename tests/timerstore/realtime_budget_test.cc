// RealtimeBudget (when a timer dequeue thread may be SCHED_FIFO) and the TimerStore's use of it.
#include "realtime_budget.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "timer_env.h"

namespace tokimq {
namespace {

using testing::TimerEnv;

constexpr int64_t kWindow = 100'000;
constexpr int64_t kBudget = 20'000;

TEST(RealtimeBudgetTest, FirstReadingOpensAWindowAndAllows) {
  RealtimeBudget b(kWindow, kBudget);
  EXPECT_TRUE(b.Allowed(5'000'000, 123'456));
}

TEST(RealtimeBudgetTest, AllowsUpToTheBudgetWithinTheWindow) {
  RealtimeBudget b(kWindow, kBudget);
  ASSERT_TRUE(b.Allowed(0, 1000));
  EXPECT_TRUE(b.Allowed(50'000, 1000 + kBudget));  // exactly the budget
  EXPECT_TRUE(b.Allowed(99'999, 1000 + kBudget));
}

TEST(RealtimeBudgetTest, DeniesPastTheBudgetUntilTheWindowEnds) {
  RealtimeBudget b(kWindow, kBudget);
  ASSERT_TRUE(b.Allowed(0, 0));
  EXPECT_FALSE(b.Allowed(30'000, kBudget + 1));
  EXPECT_FALSE(b.Allowed(99'999, kBudget + 1));  // idle since, but the window is not over
  EXPECT_TRUE(b.Allowed(100'000, kBudget + 1));  // a new window
}

TEST(RealtimeBudgetTest, ANewWindowCountsCpuFromItsOwnStart) {
  RealtimeBudget b(kWindow, kBudget);
  ASSERT_TRUE(b.Allowed(0, 0));
  ASSERT_FALSE(b.Allowed(60'000, 90'000));  // 90 ms of CPU in the first window
  ASSERT_TRUE(b.Allowed(100'000, 90'000));   // new window from 90 ms of CPU
  EXPECT_TRUE(b.Allowed(150'000, 90'000 + kBudget));
  EXPECT_FALSE(b.Allowed(160'000, 90'000 + kBudget + 1));
}

TEST(RealtimeBudgetTest, ABusyThreadIsRealtimeForAtMostTheBudgetPerWindow) {
  // A thread that is never idle (CPU time = real time): realtime for the first 20 ms of each
  // 100 ms, checked every 1 ms.
  RealtimeBudget b(kWindow, kBudget);
  int allowed = 0;
  for (int64_t t = 0; t < 10 * kWindow; t += 1000) allowed += b.Allowed(t, t) ? 1 : 0;
  EXPECT_EQ(allowed, 10 * 21);  // t = window start + 0..20 ms
}

TEST(RealtimeBudgetTest, ATimeBeforeTheWindowStartOpensANewWindow) {
  // The Clock is wall time: set back, it must not keep a spent window shut until it catches up.
  RealtimeBudget b(kWindow, kBudget);
  ASSERT_TRUE(b.Allowed(1'000'000, 0));
  ASSERT_FALSE(b.Allowed(1'050'000, kBudget + 1));
  EXPECT_TRUE(b.Allowed(900'000, kBudget + 1));
}

// The window is measured on the Clock the thread is given: on a ManualClock it rolls over after
// 100 ms of manual time, however little real time passed (and not before).
TEST(RealtimeThreadTest, TheWindowRollsOverAfter100MsOfTheGivenClock) {
  ManualClock clock;
  RealtimeThread rt(1, &clock);
  int64_t cpu_us = 0;
  std::vector<bool> switches;
  rt.TEST_cpu_us = [&cpu_us] { return cpu_us; };
  rt.TEST_set_policy = [&switches](bool realtime) {
    switches.push_back(realtime);
    return 0;
  };
  rt.Update();
  EXPECT_TRUE(rt.realtime());  // the first window opens
  cpu_us += RealtimeThread::kCpuBudgetUs + 1;  // the 20 ms budget spent
  clock.AdvanceMs(10);
  rt.Update();
  EXPECT_FALSE(rt.realtime());
  clock.AdvanceMs(89);  // 99 ms into the window
  rt.Update();
  EXPECT_FALSE(rt.realtime());
  clock.AdvanceMs(1);  // 100 ms: a new window, the CPU counted from its start
  rt.Update();
  EXPECT_TRUE(rt.realtime());
  EXPECT_EQ(switches, (std::vector<bool>{true, false, true}));
}

bool CanUseFifo() {
  sched_param p{};
  p.sched_priority = 1;
  if (::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &p) != 0) return false;
  p.sched_priority = 0;
  ::pthread_setschedparam(::pthread_self(), SCHED_OTHER, &p);
  return true;
}

TEST(RealtimeThreadTest, PriorityZeroNeverSwitches) {
  RealtimeThread rt(0, SystemClock::Default());
  rt.Update();
  EXPECT_FALSE(rt.realtime());
  EXPECT_EQ(::sched_getscheduler(0), SCHED_OTHER);
}

TEST(RealtimeThreadTest, SwitchesToFifoAndBackWhenTheBudgetIsSpent) {
  if (!CanUseFifo()) GTEST_SKIP() << "no CAP_SYS_NICE / RLIMIT_RTPRIO here";
  // A 1 s window with a 1 ms budget: the loop below spends it (CPU, not sleeping).
  RealtimeThread rt(1, SystemClock::Default(), 1'000'000, 1000);
  rt.Update();
  EXPECT_TRUE(rt.realtime());
  EXPECT_EQ(::sched_getscheduler(0), SCHED_FIFO);
  timespec start{}, now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  volatile uint64_t sink = 0;
  do {
    for (int i = 0; i < 10000; ++i) sink = sink + static_cast<uint64_t>(i);
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) * 1'000'000'000LL + (now.tv_nsec - start.tv_nsec) <
           2'000'000);
  rt.Update();
  EXPECT_FALSE(rt.realtime());
  EXPECT_EQ(::sched_getscheduler(0), SCHED_OTHER);
}

// Scheduling policy of each of this process's threads (/proc/self/task/*/stat, field 41).
std::multiset<int> ThreadPolicies() {
  std::multiset<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Fields after the ")" that closes the thread name: state is field 3, policy field 41.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i < 41 && rest >> field; ++i) {
    }
    int policy = -1;
    if (rest >> policy) out.insert(policy);
  }
  return out;
}

TEST(TimerRealtimeTest, DequeueReadAndPutThreadsRunUnderFifoWhenConfigured) {
  if (!CanUseFifo()) GTEST_SKIP() << "no CAP_SYS_NICE / RLIMIT_RTPRIO here";
  TimerEnv env(1000);
  env.topts().service_realtime_priority = 1;
  env.Open();
  const size_t before = ThreadPolicies().count(SCHED_FIFO);
  ASSERT_TRUE(env.ts().Start().ok());  // returns once its threads have their policy
  // Dequeue read and dequeue put only: enqueue, slot walks and checkpoints need no ms wake-up.
  EXPECT_EQ(ThreadPolicies().count(SCHED_FIFO), before + 2);
  ASSERT_TRUE(env.ts().Stop().ok());
}

TEST(TimerRealtimeTest, NoThreadIsRealtimeByDefault) {
  TimerEnv env(1000);
  env.Open();
  const size_t before = ThreadPolicies().count(SCHED_FIFO);
  ASSERT_TRUE(env.ts().Start().ok());
  EXPECT_EQ(ThreadPolicies().count(SCHED_FIFO), before);
  ASSERT_TRUE(env.ts().Stop().ok());
}

}  // namespace
}  // namespace tokimq
