// End-to-end timer scenarios, each with P = 1000 ms and P = 100 ms, on the ManualClock: exact
// delivery, order within a tick, past deliver times, year-long delays (rolls), recall, crashes
// before and during a hot second, downtime longer than the window, retention. A delay above a
// topic's maximum is the broker's check (TimerStore's contract says the caller validated it):
// tests/broker/send_validation_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "timer_env.h"
#include "timerstore/recall_handle.h"

namespace tokimq::testing {
namespace {

class TimerCasesTest : public ::testing::TestWithParam<int64_t> {
 protected:
  int64_t P() const { return GetParam(); }
};

// Steps the clock to each deliver time t: nothing for t at t - 1, exactly it at t.
void ExpectExactDelivery(TimerEnv& env) {
  std::set<int64_t> times;
  for (const auto& [id, t] : env.sent()) times.insert(t);
  for (int64_t t : times) {
    env.AdvanceTo(t - 1);
    size_t before = env.Delivered().size();
    size_t due_before = 0;
    for (const auto& [id, d] : env.sent()) due_before += d <= t - 1;
    EXPECT_EQ(before, due_before) << "at " << t - 1;
    env.AdvanceTo(t);
    for (const Message& m : env.Delivered()) {
      EXPECT_EQ(m.store_ms, env.sent()[m.body]) << m.body;
    }
  }
}

TEST_P(TimerCasesTest, EachDelayIsDeliveredAtItsMillisecondNeverBefore) {
  TimerEnv env(P());
  env.Open();
  int64_t now = env.clock().NowMs();
  ASSERT_NE(now % P(), 0);
  int i = 0;
  for (int64_t d : {int64_t{1}, P() - 1, P(), P() + 1, int64_t{999}, int64_t{1000},
                    int64_t{1001}, int64_t{59'999}}) {
    env.Send("d" + std::to_string(i++) + "_" + std::to_string(d), now + d);
  }
  env.Run();
  ExpectExactDelivery(env);
  EXPECT_EQ(env.Delivered().size(), env.sent().size());
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  EXPECT_EQ(env.ts().metrics().delivered.Value(), 8);
  EXPECT_EQ(env.ts().metrics().lateness_ms.Max(), 0);
}

TEST_P(TimerCasesTest, TenInOneTickComeOutInDeliverOrder) {
  TimerEnv env(P());
  env.Open();
  int64_t base = (env.clock().NowMs() / P() + 3) * P();
  for (int i = 0; i < 10; ++i) env.Send("m" + std::to_string(i), base + (9 - i) * (P() / 10));
  env.AdvanceTo(base + P());
  auto got = env.Delivered();
  ASSERT_EQ(got.size(), 10u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].body, "m" + std::to_string(9 - i));
    if (i > 0) {
      EXPECT_LE(std::stoll(got[i - 1].properties[prop::kDeliverMs]),
                std::stoll(got[i].properties[prop::kDeliverMs]));
    }
  }
}

TEST_P(TimerCasesTest, PastAndNowAreDeliveredImmediately) {
  TimerEnv env(P());
  env.Open();
  int64_t now = env.clock().NowMs();
  auto a = env.Send("past", now - 3'600'000);
  auto b = env.Send("now", now);
  EXPECT_TRUE(a.delivered_now);
  EXPECT_TRUE(b.delivered_now);
  auto got = env.Delivered();  // no Run(), no tick
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].store_ms, now);
  EXPECT_EQ(env.ts().Recall(a.recall_handle).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(TimerCasesTest, YearDelayRollsWithoutACopyInTheCommitLog) {
  const int64_t kDay = 86'400'000;
  TimerEnv env(P(), 7 * kDay);
  env.Open();
  PhysicalOffset start_end = env.ms().commit_log()->MaxOffset();
  int64_t deliver = env.clock().NowMs() + 365 * kDay + 4321;
  env.Send("year", deliver);
  env.Run();
  for (int64_t t = env.clock().NowMs() + kDay; t < deliver - 1; t += kDay) env.AdvanceTo(t);
  env.AdvanceTo(deliver - 1);
  EXPECT_TRUE(env.Delivered().empty());
  env.AdvanceTo(deliver);
  auto got = env.Delivered();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].store_ms, deliver);
  int64_t rolls = std::stoll(got[0].properties[prop::kTimerRollCount]);
  EXPECT_GE(rolls, 52);
  EXPECT_EQ(env.ts().metrics().rolled.Value(), rolls);
  // CommitLog growth: the timer-topic record plus the delivered copy, nothing else.
  int records = 0;
  for (PhysicalOffset at = start_end; at < env.ms().commit_log()->MaxOffset();) {
    auto next = env.ms().commit_log()->ReadNext(at);
    ASSERT_TRUE(next.ok()) << next.status();
    ++records;
    at = next->second;
  }
  EXPECT_EQ(records, 2);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

TEST_P(TimerCasesTest, RecallingHalfDeliversTheOtherHalfAndRefusesUnknownRepeatedAndLateRecalls) {
  TimerEnv env(P());
  env.Open();
  int64_t now = env.clock().NowMs();
  std::vector<std::string> handles;
  for (int i = 0; i < 1000; ++i) {
    handles.push_back(env.Send("r" + std::to_string(i), now + 5000 + i * 7).recall_handle);
  }
  env.Run();
  EXPECT_EQ(env.ts().metrics().pending.Value(), 1000);
  for (int i = 0; i < 1000; i += 2) ASSERT_TRUE(env.ts().Recall(handles[i]).ok()) << i;
  EXPECT_EQ(env.ts().Recall(handles[0]).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(env.ts().Recall(handles[0]).message().find("already recalled"), std::string::npos);
  for (int i = 0; i < 100; ++i) {
    RecallHandle fake{PhysicalOffset(1'000'000 + i * 13), now + 5000,
                      0x1234u + static_cast<uint32_t>(i)};
    EXPECT_EQ(env.ts().Recall(fake.Encode()).code(), absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(env.ts().Recall("not a handle").code(), absl::StatusCode::kInvalidArgument);
  env.Run();
  env.Ack();
  EXPECT_EQ(env.ts().metrics().pending.Value(), 500);
  env.AdvanceTo(now + 5000 + 1000 * 7 + P());
  auto got = env.Delivered();
  ASSERT_EQ(got.size(), 500u);
  for (const Message& m : got) EXPECT_EQ(std::stoi(m.body.substr(1)) % 2, 1) << m.body;
  absl::Status late = env.ts().Recall(handles[1]);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("already delivered"), std::string::npos);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  EXPECT_EQ(env.ts().metrics().pending.underflows(), 0);
  EXPECT_EQ(env.ts().metrics().recalled.Value(), 500);
  EXPECT_EQ(env.ts().metrics().delivered.Value(), 500);
  // Crash before the delivered copies are durable: they come again, the recalled ones do not.
  env.Crash();
  env.Run();
  env.sent().clear();
  for (int i = 1; i < 1000; i += 2) env.sent()["r" + std::to_string(i)] = now + 5000 + i * 7;
  env.CheckHistory(env.sent());
}

TEST_P(TimerCasesTest, RecallSurvivesCrashBeforeDue) {
  TimerEnv env(P());
  env.Open();
  int64_t now = env.clock().NowMs();
  auto h = env.Send("x", now + 10'000).recall_handle;
  env.Send("y", now + 10'000);
  env.Run();
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  ASSERT_TRUE(env.ts().Recall(h).ok());
  env.Ack();
  env.Crash();
  EXPECT_EQ(env.ts().Recall(h).code(), absl::StatusCode::kFailedPrecondition);
  env.AdvanceTo(now + 20'000);
  auto got = env.Delivered();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "y");
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

// `n` messages due in one second, crash one second before: every one delivered once. (100k runs
// in the benchmark and in TimerCasesFullSize below when not under sanitizers.)
void RunHotSecondCrash(int64_t p, int n) {
  TimerEnv env(p, 3'600'000, 8 << 20);
  env.Open();
  int64_t due = (env.clock().NowMs() / 1000 + 5) * 1000;
  for (int i = 0; i < n; ++i) env.Send("h" + std::to_string(i), due + (i % 1000));
  env.Ack();
  env.AdvanceTo(due - 1000);
  env.Crash();
  env.AdvanceTo(due + 999);
  env.CheckHistory(env.sent());
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  EXPECT_EQ(env.ts().metrics().pending.underflows(), 0);
}

TEST_P(TimerCasesTest, HotSecondSurvivesKillOneSecondBefore) { RunHotSecondCrash(P(), 20'000); }

TEST_P(TimerCasesTest, DueWhileStoppedLongerThanWindowComeOutAtStart) {
  const int64_t kDay = 86'400'000;
  TimerEnv env(P(), kDay);  // window 1 day < 8 days of downtime
  env.Open();
  int64_t now = env.clock().NowMs();
  for (int i = 0; i < 10'000; ++i) env.Send("s" + std::to_string(i), now + 1000 + i * 37);
  env.Run();
  env.CleanRestart();
  env.clock().AdvanceMs(8 * kDay);
  env.CleanRestart();
  env.Run();
  env.CheckHistory(env.sent());
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  // Messages sent after the downtime for a time beyond readTime + window must roll, not clobber.
  int64_t t = env.clock().NowMs();
  env.Send("after", t + 2 * kDay);
  env.AdvanceTo(t + 2 * kDay);
  EXPECT_EQ(env.Delivered().back().body, "after");
}

TEST_P(TimerCasesTest, RetentionDoesNotDeletePinnedSegment) {
  const int64_t kHour = 3'600'000;
  TimerEnv env(P(), 3 * 86'400'000LL, 64 << 10);
  env.Open();
  auto filler = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Message m;
      m.topic = "filler";
      m.body = std::string(1000, 'f');
      ASSERT_TRUE(env.ms().Put(std::move(m)).ok());
    }
  };
  filler(4500);  // the timer record lands past the first 4 MiB pin bucket
  int64_t deliver = env.clock().NowMs() + 2 * 24 * kHour;
  env.Send("keep", deliver);
  env.Run();
  for (int h = 0; h < 47; ++h) {
    env.AdvanceTo(env.clock().NowMs() + kHour);
    filler(100);
    auto del = env.ms().DeleteExpired(kHour);
    ASSERT_TRUE(del.ok()) << del.status();
  }
  EXPECT_GT(env.ms().commit_log()->MinOffset().value(), 0);  // retention did run
  env.AdvanceTo(deliver);
  auto got = env.Delivered();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].store_ms, deliver);
}

// The copy put into the real topic: real destination back in topic / queue id (and gone from
// the properties), the producer's properties kept, the TIMER_* delivery properties set (a stale
// one from the producer replaced).
TEST(TimerDeliveredCopy, KeepsUserPropertiesAndCarriesTimerProperties) {
  TimerEnv env(100);
  env.Open();
  const int64_t now = env.clock().NowMs();
  const int64_t deliver = now + 1'500;
  Message m;
  m.topic = "t";
  m.queue_id = 0;
  m.born_ms = now - 7;
  m.body = "payload";
  m.properties[prop::kMessageId] = "id-1";
  m.properties[prop::kKeys] = "order-42";
  m.properties["custom"] = std::string(40, 'v');
  m.properties[prop::kTimerUnitPos] = "stale";
  auto r = env.ts().Schedule(std::move(m), deliver);
  ASSERT_TRUE(r.ok()) << r.status();
  env.Run();  // enqueued (TimerLog unit written) at `now`
  env.AdvanceTo(deliver);
  auto got = env.Delivered();
  ASSERT_EQ(got.size(), 1u);
  const Message& d = got[0];
  EXPECT_EQ(d.topic, "t");
  EXPECT_EQ(d.queue_id, 0);
  EXPECT_EQ(d.body, "payload");
  EXPECT_EQ(d.born_ms, now - 7);
  EXPECT_EQ(d.store_ms, deliver);
  const auto& p = d.properties;
  EXPECT_EQ(p.at(prop::kMessageId), "id-1");
  EXPECT_EQ(p.at(prop::kKeys), "order-42");
  EXPECT_EQ(p.at("custom"), std::string(40, 'v'));
  EXPECT_EQ(p.count(prop::kRealTopic), 0u);
  EXPECT_EQ(p.count(prop::kRealQueueId), 0u);
  EXPECT_EQ(p.count(prop::kTimerRollCount), 0u);
  EXPECT_EQ(p.at(prop::kDeliverMs), std::to_string(deliver));
  EXPECT_EQ(p.at(prop::kTimerDequeueMs), std::to_string(deliver));
  EXPECT_EQ(p.at(prop::kTimerEnqueueMs), std::to_string(now));
  EXPECT_EQ(p.at(kTimerSourceOffset), std::to_string(r->put.physical_offset.value()));
  ASSERT_NE(p.at(prop::kTimerUnitPos), "stale");
  EXPECT_GE(std::stoll(p.at(prop::kTimerUnitPos)), 0);
}

// A scheduled message carrying TIMER_DELETE_OF (which only Recall's markers may carry) is not
// taken for a recall marker: it does not cancel the message at that offset and is delivered
// itself, without the property.
TEST(TimerDeliveredCopy, ScheduledMessageWithDeleteOfPropertyIsNotARecall) {
  TimerEnv env(100);
  env.Open();
  const int64_t deliver = env.clock().NowMs() + 300;
  Message victim;
  victim.topic = "t";
  victim.queue_id = 0;
  victim.body = "victim";
  auto v = env.ts().Schedule(std::move(victim), deliver);
  ASSERT_TRUE(v.ok()) << v.status();
  Message forged;
  forged.topic = "t";
  forged.queue_id = 0;
  forged.body = "forged";
  forged.properties[kTimerDeleteOf] = std::to_string(v->put.physical_offset.value());
  ASSERT_TRUE(env.ts().Schedule(std::move(forged), deliver).ok());
  env.Run();
  env.AdvanceTo(deliver);
  auto got = env.Delivered();
  ASSERT_EQ(got.size(), 2u);
  std::set<std::string> bodies;
  for (const Message& d : got) {
    bodies.insert(d.body);
    EXPECT_EQ(d.properties.count(kTimerDeleteOf), 0u) << d.body;
  }
  EXPECT_EQ(bodies, (std::set<std::string>{"victim", "forged"}));
  EXPECT_EQ(env.ts().metrics().recalled.Value(), 0);
}

// The copy's properties reach the store as record bytes: its tag must still be indexed in the
// real topic's ConsumeQueue (tag filters), as for a message sent there directly.
TEST(TimerDeliveredCopy, TagOfTheCopyIsInTheConsumeQueueEntry) {
  TimerEnv env(100);
  env.Open();
  const int64_t deliver = env.clock().NowMs() + 300;
  for (const std::string tag : {"TagA", ""}) {
    Message m;
    m.topic = "t";
    m.queue_id = 0;
    m.body = "tag " + tag;
    if (!tag.empty()) m.properties[prop::kTag] = tag;
    ASSERT_TRUE(env.ts().Schedule(std::move(m), deliver).ok());
  }
  env.Run();
  env.AdvanceTo(deliver);
  ASSERT_EQ(env.Delivered().size(), 2u);
  for (int64_t qo : {0, 1}) {
    auto e = env.ms().GetEntry("t", 0, QueueOffset(qo));
    ASSERT_TRUE(e.ok() && e->has_value());
    auto d = env.ms().Read((*e)->physical_offset);
    ASSERT_TRUE(d.ok()) << d.status();
    const auto tag = d->properties.find(prop::kTag);
    EXPECT_EQ((*e)->tag_hash, tag == d->properties.end() ? 0 : TagHash(tag->second)) << d->body;
    EXPECT_EQ(d->body == "tag TagA", (*e)->tag_hash == TagHash("TagA"));
  }
}

INSTANTIATE_TEST_SUITE_P(Precision, TimerCasesTest, ::testing::Values(1000, 100),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

#if !defined(__SANITIZE_ADDRESS__)
TEST(TimerCasesFullSize, HundredThousandDueInOneSecondSurviveKillOneSecondBefore) { RunHotSecondCrash(1000, 100'000); }
#endif

}  // namespace
}  // namespace tokimq::testing
