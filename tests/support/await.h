// AwaitTrue: the one bounded wait of the tests that drive other processes or threads in real
// time (a real broker binary, etcd, a LeaderElection's keepalive thread). It polls a predicate
// until it holds or a deadline passes, and on a timeout fails with what was awaited.
//
// Unit tests never call it: they drive a ManualClock and step functions (STYLE.md, "tests
// never sleep"). Real-process tests wait on a process they do not control, so they poll; this
// is the only place that sleeps between polls, so that every such wait is bounded and says what
// it waited for when it gives up.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace tokimq::testing {

// Calls `pred` every `poll` (real time, steady clock) until it returns true, then succeeds. When
// `timeout` passes first, `pred` is called one last time; if that is false too the result is a
// failure "timed out after <timeout> ms waiting for <what>". Use as
// `ASSERT_TRUE(AwaitTrue([&] { ... }, std::chrono::seconds(30), "3 members registered"))`, or
// convert to bool where no gtest assertion is wanted (process start-up helpers).
// `pred` runs on the calling thread; the first call is immediate.
inline ::testing::AssertionResult AwaitTrue(
    const std::function<bool()>& pred, std::chrono::milliseconds timeout, std::string_view what,
    std::chrono::milliseconds poll = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(poll);
  }
  if (pred()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "timed out after " << timeout.count() << " ms waiting for " << what;
}

}  // namespace tokimq::testing
