// Test environment for TimerStore: ManualClock, FaultInjectionFileSystem, a real MessageStore
// with small segments, and helpers to crash (close without flushing, drop unsynced data) and
// reopen. History helpers read what landed in real topics.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commitlog/message_store.h"
#include "common/clock.h"
#include "common/fault_injection_fs.h"
#include "test_util.h"
#include "timerstore/timer_store.h"

namespace tokimq::testing {

inline constexpr int64_t kStartMs = 1'700'000'000'123;  // not a multiple of 100 or 1000

class TimerEnv {
 public:
  explicit TimerEnv(int64_t precision_ms, int64_t window_ms = 3'600'000,
                    uint64_t segment_size = 1 << 20)
      : clock_(kStartMs) {
    mopts_.dir = tmp_.Join("store");
    mopts_.commitlog.segment_size = segment_size;
    mopts_.commitlog.flush_mode = FlushMode::kAsync;
    mopts_.commitlog.async_flush_interval_ms = 0;
    topts_.dir = tmp_.Join("timer");
    topts_.precision_ms = precision_ms;
    topts_.window_ms = window_ms;
    topts_.timerlog_segment_size = 64 * 72;
  }
  ~TimerEnv() {
    ts_.reset();
    if (ms_) (void)ms_->Close();
  }

  void Open() { ASSERT_TRUE(TryOpen().ok()) << TryOpenError(); }
  // Open that returns the error (a recovery that dies at an injected fault) instead of failing
  // the test; on error the stores stay closed.
  absl::Status TryOpen() {
    CloseForCrash();
    auto ms = MessageStore::Open(&fs_, &clock_, mopts_);
    if (!ms.ok()) return last_open_ = ms.status();
    ms_ = std::move(*ms);
    auto ts = TimerStore::Open(&fs_, &clock_, ms_.get(), topts_);
    if (!ts.ok()) {
      ms_.reset();
      return last_open_ = ts.status();
    }
    ts_ = std::move(*ts);
    return last_open_ = absl::OkStatus();
  }
  std::string TryOpenError() const { return last_open_.ToString(); }
  // Drops the stores as a crash does (no flush, no checkpoint) without reopening.
  void CloseForCrash() {
    ts_.reset();
    ms_.reset();
  }
  // kill -9 + power loss: no flush, no checkpoint; unsynced bytes vanish.
  void Crash() {
    ts_.reset();
    ms_.reset();
    ASSERT_TRUE(fs_.DropUnsyncedData().ok());
    Open();
  }
  // kill -9 alone: no flush, no checkpoint; what was written to files stays (the OS page cache
  // survives the process), what sat in user-space buffers (the TimerLog's) is gone.
  void Kill() {
    ts_.reset();
    ms_.reset();
    Open();
  }
  void CleanRestart() {
    ASSERT_TRUE(ts_->Checkpoint().ok());
    ts_.reset();
    ASSERT_TRUE(ms_->Close().ok());
    ms_.reset();
    Open();
  }

  // Schedules body `id` for `deliver_ms` into (topic, 0) and makes it durable (acknowledged).
  ScheduleResult Send(const std::string& id, int64_t deliver_ms, const std::string& topic = "t") {
    Message m;
    m.topic = topic;
    m.queue_id = 0;
    m.born_ms = clock_.NowMs();
    m.body = id;
    m.properties[prop::kMessageId] = id;
    auto r = ts_->Schedule(std::move(m), deliver_ms);
    EXPECT_TRUE(r.ok()) << r.status();
    sent_[id] = deliver_ms;
    return r.ok() ? *r : ScheduleResult{};
  }
  void Ack() { ASSERT_TRUE(ms_->Flush().ok()); }

  void Run() { ASSERT_TRUE(ts_->RunUntilIdle().ok()); }
  void AdvanceTo(int64_t ms) {
    clock_.SetMs(ms);
    Run();
  }

  std::vector<Message> Delivered(const std::string& topic = "t") {
    auto r = ms_->ReadQueue(topic, 0, QueueOffset(0), 1 << 30);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<Message>{};
  }

  // 0 lost, 0 early, 0 duplicates among `expected` ids (id -> deliver ms); nothing else.
  void CheckHistory(const std::map<std::string, int64_t>& expected,
                    const std::string& topic = "t") {
    std::map<std::string, int> seen;
    for (const Message& m : Delivered(topic)) {
      seen[m.body]++;
      auto it = expected.find(m.body);
      ASSERT_NE(it, expected.end()) << "unexpected delivery " << m.body;
      EXPECT_GE(m.store_ms, it->second) << "early delivery of " << m.body;
    }
    for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << "duplicate " << id;
    for (const auto& [id, ms] : expected) EXPECT_EQ(seen.count(id), 1u) << "lost " << id;
  }

  ManualClock& clock() { return clock_; }
  FaultInjectionFileSystem& fs() { return fs_; }
  MessageStore& ms() { return *ms_; }
  TimerStore& ts() { return *ts_; }
  TimerStoreOptions& topts() { return topts_; }
  MessageStoreOptions& mopts() { return mopts_; }
  std::map<std::string, int64_t>& sent() { return sent_; }
  const TempDir& tmp() const { return tmp_; }

 private:
  TempDir tmp_;
  ManualClock clock_;
  FaultInjectionFileSystem fs_;
  MessageStoreOptions mopts_;
  TimerStoreOptions topts_;
  std::unique_ptr<MessageStore> ms_;
  std::unique_ptr<TimerStore> ts_;
  std::map<std::string, int64_t> sent_;
  absl::Status last_open_;
};

}  // namespace tokimq::testing
