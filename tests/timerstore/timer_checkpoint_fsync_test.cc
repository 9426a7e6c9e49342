// The 1 s timer checkpoint fsyncs only what changed since the last one (issue 21 item 1): an
// idle store (nothing new in the CommitLog, TimerLog or wheel; only the read tick moving) makes
// no fsync at all, and a crash after such skipped checkpoints loses, repeats and advances
// nothing. Syncs are counted by the FaultInjectionFileSystem; ManualClock, no threads.
#include <gtest/gtest.h>

#include "timer_env.h"

namespace tokimq::testing {
namespace {

class TimerCheckpointFsyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.mopts().checkpoint_interval_ms = 0;  // no store checkpointer thread counting along
    env_.Open();
    now_ = env_.clock().NowMs();
  }
  int Syncs() { return env_.fs().sync_count(); }
  void Checkpoint() { ASSERT_TRUE(env_.ts().Checkpoint().ok()); }

  TimerEnv env_{1000};
  int64_t now_ = 0;
};

TEST_F(TimerCheckpointFsyncTest, CheckpointOfAnIdleStoreMakesNoFsync) {
  env_.Send("a", now_ + 600'000);
  env_.Send("b", now_ + 700'000);
  env_.Run();
  int before = Syncs();
  Checkpoint();
  EXPECT_GT(Syncs(), before);
  before = Syncs();
  Checkpoint();
  EXPECT_EQ(Syncs() - before, 0) << "unchanged wheel or checkpoint files fsynced again";
  // Only the read tick moves (empty slots walked): still nothing to write.
  env_.AdvanceTo(now_ + 5'000);
  Checkpoint();
  EXPECT_EQ(Syncs() - before, 0);
  // ... until it moved a minute: then the checkpoint file alone (file + directory).
  env_.AdvanceTo(now_ + 5'000 + 61'000);
  Checkpoint();
  EXPECT_EQ(Syncs() - before, 2);
}

TEST_F(TimerCheckpointFsyncTest, NewPutAfterIdleCheckpointsFsyncsItsFilesAgain) {
  env_.Send("a", now_ + 600'000);
  env_.Run();
  Checkpoint();
  Checkpoint();
  const int before = Syncs();
  env_.Send("b", now_ + 500'000);
  env_.Run();
  Checkpoint();
  // CommitLog, timer-topic queue file, store checkpoint (file + directory), TimerLog, wheel,
  // timer checkpoint (file + directory): each once, as before the idle checkpoints.
  EXPECT_EQ(Syncs() - before, 8);
}

TEST_F(TimerCheckpointFsyncTest, PowerLossAfterSkippedCheckpointsLosesNothingAndDeliversOnce) {
  env_.Send("a", now_ + 10'000);
  env_.Send("b", now_ + 12'000);
  env_.Ack();
  env_.Run();
  Checkpoint();
  for (int64_t t = 1'000; t <= 8'000; t += 1'000) {  // idle seconds, checkpoints skipped
    env_.AdvanceTo(now_ + t);
    Checkpoint();
  }
  env_.AdvanceTo(now_ + 10'000);  // "a" delivered
  Checkpoint();
  env_.AdvanceTo(now_ + 11'000);
  Checkpoint();  // idle again
  env_.Crash();
  env_.Run();
  env_.AdvanceTo(now_ + 12'000);
  env_.AdvanceTo(now_ + 15'000);
  env_.CheckHistory(env_.sent());
  EXPECT_EQ(env_.ts().metrics().pending.Value(), 0);
}

}  // namespace
}  // namespace tokimq::testing
