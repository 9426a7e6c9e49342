// Retention moves (timerstore/src/retention_mover.cc): a pending timer message in a CommitLog
// segment retention wants is copied to the head and the segment goes. ManualClock and the
// fault-injecting file system; a move interrupted at each step (kill -9 + loss of unsynced
// bytes), a recall during and after the move, a message that falls due during its move, and a
// delay beyond the wheel window (roll) moved more than once. Every case ends with the history
// check: each message delivered exactly once, at its own millisecond, nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "move_state.h"
#include "timer_env.h"
#include "timerstore/recall_handle.h"

namespace tokimq::testing {
namespace {

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kRetention = kMinute;

class TimerRetentionMoveTest : public ::testing::Test {
 protected:
  TimerRetentionMoveTest() : env_(1000, kHour, 64 << 10) {}
  void SetUp() override { env_.Open(); }

  // n records of 1 KB in a plain topic (about 60 per 64 KiB segment).
  void Fill(int n) {
    for (int i = 0; i < n; ++i) {
      Message m;
      m.topic = "fill";
      m.body = std::string(1000, 'f');
      ASSERT_TRUE(env_.ms().Put(std::move(m)).ok());
    }
  }
  // Churn that makes the segments before it expire: fill, advance 2 min, fill a bit more.
  void Churn() {
    Fill(300);
    env_.AdvanceTo(env_.clock().NowMs() + 2 * kMinute);
    Fill(70);
    env_.Ack();
  }
  absl::StatusOr<int> Retention() { return env_.ms().DeleteExpired(kRetention); }
  PhysicalOffset MinOffset() { return env_.ms().commit_log()->MinOffset(); }
  // Advances to each sent deliver time in order, exactly, and checks the history plus that
  // every delivery happened at its own millisecond.
  void DeliverAllAndCheck() {
    std::map<int64_t, int> times;
    for (const auto& [id, ms] : env_.sent()) times[ms]++;
    for (const auto& [ms, n] : times) {
      if (ms > env_.clock().NowMs()) env_.AdvanceTo(ms);
    }
    env_.CheckHistory(env_.sent());
    for (const Message& m : env_.Delivered()) {
      EXPECT_EQ(m.store_ms, env_.sent()[m.body]) << m.body << " not at its millisecond";
    }
    EXPECT_EQ(env_.ts().metrics().pending.Value(), 0);
  }

  TimerEnv env_;
};

TEST_F(TimerRetentionMoveTest, PendingMessageIsMovedAndItsSegmentsDeleted) {
  const int64_t now = env_.clock().NowMs();
  ScheduleResult in_window = env_.Send("in-window", now + 40 * kMinute);
  ScheduleResult roll = env_.Send("roll", now + 5 * kHour);  // beyond the 1 h window
  env_.Ack();
  Churn();
  auto n = Retention();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_GE(*n, 4);
  EXPECT_GT(MinOffset(), roll.put.physical_offset);
  EXPECT_GT(MinOffset(), in_window.put.physical_offset);
  EXPECT_EQ(env_.ts().metrics().moved.Value(), 2);
  EXPECT_GT(env_.ts().metrics().moved_bytes.Value(), 0);
  EXPECT_EQ(env_.ts().metrics().pinned_bytes.Value(), 0);
  EXPECT_EQ(env_.ts().metrics().pending.Value(), 2);
  // Moved again each time their new segment is due: at most once per retention period.
  for (int round = 0; round < 3; ++round) {
    Churn();
    ASSERT_TRUE(Retention().ok());
  }
  EXPECT_EQ(env_.ts().metrics().moved.Value(), 8);
  env_.ts().RefreshGauges();
  EXPECT_LE(env_.ts().metrics().oldest_pending_segment_age_ms.Value(), 2 * kMinute);
  DeliverAllAndCheck();
}

TEST_F(TimerRetentionMoveTest, NoPendingMessageNoCopy) {
  Churn();
  auto n = Retention();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_GE(*n, 4);
  EXPECT_EQ(env_.ts().metrics().moved.Value(), 0);
}

// kill -9 + power loss after each step of the move (1 begun, 2 copies written, 3 copies and
// TimerLog synced, 4 committed, 5 segments deleted), then retention again and delivery.
TEST_F(TimerRetentionMoveTest, CrashAtEachStepOfTheMoveDeliversEachMessageOnce) {
  for (int crash_at = 1; crash_at <= 5; ++crash_at) {
    SCOPED_TRACE(crash_at);
    TimerEnv env(1000, kHour, 64 << 10);
    env.topts().TEST_move_step = [&](int step) {
      return step == crash_at ? absl::AbortedError("crash") : absl::OkStatus();
    };
    env.Open();
    const int64_t now = env.clock().NowMs();
    for (int i = 0; i < 20; ++i) env.Send("m" + std::to_string(i), now + 30 * kMinute + i * 777);
    env.Send("roll", now + 3 * kHour + 1);
    env.Ack();
    env.Run();
    auto fill = [&](int k) {
      for (int i = 0; i < k; ++i) {
        Message m;
        m.topic = "fill";
        m.body = std::string(1000, 'f');
        ASSERT_TRUE(env.ms().Put(std::move(m)).ok());
      }
    };
    fill(300);
    env.AdvanceTo(now + 2 * kMinute);
    fill(70);
    env.Ack();
    auto n = env.ms().DeleteExpired(kRetention);
    EXPECT_EQ(n.ok(), crash_at == 5) << n.status();
    env.Crash();
    env.topts().TEST_move_step = nullptr;
    env.Open();
    n = env.ms().DeleteExpired(kRetention);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_GT(env.ms().commit_log()->MinOffset().value(), 0);
    EXPECT_EQ(env.ts().metrics().pinned_bytes.Value(), 0);
    // A second crash with the moved copies as the only record of the messages.
    env.Crash();
    std::map<int64_t, int> times;
    for (const auto& [id, ms] : env.sent()) times[ms]++;
    for (const auto& [ms, k] : times) env.AdvanceTo(ms);
    env.CheckHistory(env.sent());
    for (const Message& m : env.Delivered()) EXPECT_EQ(m.store_ms, env.sent()[m.body]);
    EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  }
}

// Committed, then kill -9 before the segments are deleted, and no retention pass before the
// deliver times: the old units still find their records, and must not deliver them.
TEST_F(TimerRetentionMoveTest, CommittedMoveWhoseSegmentsStayDeliversTheCopiesOnly) {
  const int64_t now = env_.clock().NowMs();
  for (int i = 0; i < 10; ++i) env_.Send("m" + std::to_string(i), now + 30 * kMinute + i * 777);
  env_.Send("roll", now + 3 * kHour + 1);
  env_.Ack();
  // The crash comes after the commit and before the deletion: the segments are put back as
  // they were when the move committed (they are immutable by then).
  namespace fs = std::filesystem;
  const fs::path segments = fs::path(env_.mopts().dir) / "commitlog";
  const fs::path saved = fs::path(env_.tmp().Join("saved"));
  env_.topts().TEST_move_step = [&](int step) {
    if (step == 4) fs::copy(segments, saved);
    return absl::OkStatus();
  };
  env_.CleanRestart();
  Churn();
  ASSERT_TRUE(Retention().ok());
  ASSERT_GT(MinOffset().value(), 0);
  env_.CloseForCrash();
  for (const auto& e : fs::directory_iterator(saved)) {
    if (!fs::exists(segments / e.path().filename())) fs::copy(e.path(), segments);
  }
  env_.Crash();
  ASSERT_EQ(MinOffset().value(), 0);
  DeliverAllAndCheck();
  EXPECT_EQ(env_.ts().metrics().dropped.Value(), 0);
}

TEST_F(TimerRetentionMoveTest, RecallDuringTheMoveCancels) {
  const int64_t now = env_.clock().NowMs();
  ScheduleResult a = env_.Send("a", now + 20 * kMinute);
  ScheduleResult b = env_.Send("b", now + 3 * kHour);  // roll
  env_.Send("c", now + 25 * kMinute);
  env_.Ack();
  env_.topts().TEST_move_step = [&](int step) {
    if (step == 2) {  // copies written, not committed
      EXPECT_TRUE(env_.ts().Recall(a.recall_handle).ok());
      EXPECT_TRUE(env_.ts().Recall(b.recall_handle).ok());
    }
    return absl::OkStatus();
  };
  env_.CleanRestart();
  Churn();
  ASSERT_TRUE(Retention().ok());
  EXPECT_GT(MinOffset(), b.put.physical_offset);
  env_.sent().erase("a");
  env_.sent().erase("b");
  DeliverAllAndCheck();
  EXPECT_EQ(env_.ts().metrics().recalled.Value(), 2);
}

TEST_F(TimerRetentionMoveTest, RecallAfterTheSegmentIsGoneCancels) {
  const int64_t now = env_.clock().NowMs();
  ScheduleResult a = env_.Send("a", now + 20 * kMinute);
  ScheduleResult b = env_.Send("b", now + 3 * kHour);  // roll
  env_.Send("c", now + 25 * kMinute);
  env_.Ack();
  Churn();
  ASSERT_TRUE(Retention().ok());
  Churn();
  ASSERT_TRUE(Retention().ok());  // moved twice: the copies of copies still name the origin
  ASSERT_GT(MinOffset(), b.put.physical_offset);
  EXPECT_TRUE(env_.ts().Recall(a.recall_handle).ok());
  EXPECT_TRUE(env_.ts().Recall(b.recall_handle).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(env_.ts().Recall(a.recall_handle)));
  env_.Ack();    // the delete markers are durable
  env_.Crash();  // the recalls survive a crash (delete markers, recalled set)
  env_.sent().erase("a");
  env_.sent().erase("b");
  DeliverAllAndCheck();
}

TEST_F(TimerRetentionMoveTest, HandleWithAnotherDeliverTimeAfterTheSegmentIsGoneCancelsNothing) {
  const int64_t now = env_.clock().NowMs();
  ScheduleResult a = env_.Send("a", now + 20 * kMinute);
  env_.Ack();
  Churn();
  ASSERT_TRUE(Retention().ok());
  ASSERT_GT(MinOffset(), a.put.physical_offset);
  absl::StatusOr<RecallHandle> h = RecallHandle::Decode(a.recall_handle);
  ASSERT_TRUE(h.ok());
  h->deliver_ms += 1;  // same record, another time: not the handle Schedule gave
  // The origin record is gone, so the recall cannot tell; the copy is still delivered.
  (void)env_.ts().Recall(h->Encode());
  env_.Ack();
  DeliverAllAndCheck();
  EXPECT_EQ(env_.Delivered().size(), 1u);
}

TEST_F(TimerRetentionMoveTest, MessageDueDuringItsMoveIsDeliveredOnce) {
  const int64_t now = env_.clock().NowMs();
  env_.Send("soon", now + 2 * kMinute + 30'000);
  env_.Send("later", now + 50 * kMinute);
  env_.Ack();
  Fill(300);
  env_.AdvanceTo(now + 2 * kMinute);
  Fill(70);
  env_.Ack();
  bool advanced = false;
  env_.topts().TEST_move_step = [&](int step) {
    if (step == 2 && !advanced) {  // copies written: "soon" falls due and is delivered now
      advanced = true;
      env_.AdvanceTo(now + 2 * kMinute + 30'000);
      EXPECT_EQ(env_.Delivered().size(), 1u);
    }
    return absl::OkStatus();
  };
  env_.CleanRestart();
  ASSERT_TRUE(Retention().ok());
  EXPECT_TRUE(advanced);
  EXPECT_EQ(env_.ts().metrics().move_aborts.Value(), 1);
  EXPECT_EQ(env_.ts().metrics().moved.Value(), 0);
  // The abandoned copy of "soon" is linked into its walked tick and dropped, not delivered.
  env_.Run();
  env_.Ack();
  env_.Crash();
  std::vector<Message> got = env_.Delivered();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "soon");
  EXPECT_EQ(got[0].store_ms, now + 2 * kMinute + 30'000);
  env_.sent().erase("soon");  // its delivery leaves with the churn's segments below
  // The next pass moves "later" alone.
  Churn();
  ASSERT_TRUE(Retention().ok());
  EXPECT_EQ(env_.ts().metrics().moved.Value(), 1);
  env_.Crash();
  DeliverAllAndCheck();
}

TEST_F(TimerRetentionMoveTest, RollAndMoveTogether) {
  // A delay of 5 windows with retention passes 72 min apart (longer than the 1 h window): the
  // message rolls between passes and each pass moves the roll's continuation. (With passes
  // closer than a window it never rolls: each copy is parked anew a window ahead.)
  const int64_t now = env_.clock().NowMs();
  ScheduleResult r = env_.Send("far", now + 5 * kHour + 17);
  env_.Ack();
  int64_t rolled = 0, moved = 0;
  for (int i = 0; i < 4; ++i) {
    Churn();
    ASSERT_TRUE(Retention().ok());
    env_.AdvanceTo(env_.clock().NowMs() + 70 * kMinute);
    if (i == 1 || i == 3) {  // counters start again after a crash
      rolled += env_.ts().metrics().rolled.Value();
      moved += env_.ts().metrics().moved.Value();
    }
    if (i == 1) env_.Crash();
  }
  EXPECT_GT(MinOffset(), r.put.physical_offset);
  EXPECT_GE(rolled, 4);  // one per pass at least
  EXPECT_EQ(moved, 4);
  DeliverAllAndCheck();
}

// docs/formats/timermoves.md: the worked example, and the corruption list.
TEST(MoveStateFormat, WorkedExampleRoundTrips) {
  MoveState st;
  st.frontier = PhysicalOffset(8 << 20);
  st.started_epoch = 3;
  st.committed_epoch = 2;
  st.abandoned.push_back({3, PhysicalOffset(9 << 20)});
  const std::string bytes = st.Encode();
  const unsigned char expected[] = {
      0x54, 0x4b, 0x4d, 0x56, 0x01, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x90, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1a, 0x9d, 0x3c, 0x0a};
  ASSERT_EQ(bytes, std::string(reinterpret_cast<const char*>(expected), sizeof(expected)));
  auto back = MoveState::Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->frontier, PhysicalOffset(8 << 20));
  EXPECT_EQ(back->started_epoch, 3u);
  EXPECT_EQ(back->committed_epoch, 2u);
  ASSERT_EQ(back->abandoned.size(), 1u);
  EXPECT_EQ(back->abandoned[0].copies_end, PhysicalOffset(9 << 20));
  EXPECT_TRUE(back->Committed(2));
  EXPECT_FALSE(back->Committed(3));  // abandoned
  EXPECT_FALSE(back->Committed(4));  // never committed
  EXPECT_FALSE(back->Committed(0));  // not a copy
}

TEST(MoveStateFormat, CorruptionIsDataLoss) {
  MoveState st;
  st.frontier = PhysicalOffset(123);
  st.started_epoch = st.committed_epoch = 1;
  const std::string good = st.Encode();
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_TRUE(absl::IsDataLoss(MoveState::Decode(good.substr(0, cut)).status())) << cut;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x40);
    EXPECT_TRUE(absl::IsDataLoss(MoveState::Decode(bad).status())) << i;
  }
  std::string longer = good;
  longer[8] = static_cast<char>(longer[8] + 16);  // length says one more entry
  EXPECT_TRUE(absl::IsDataLoss(MoveState::Decode(longer).status()));
}

}  // namespace
}  // namespace tokimq::testing
