// Disk full on a follower (issue 20 item 7): a group of three replicas in sync mode whose
// follower F has its data dir on a small tmpfs (tests/integration/disk_full_test.cc's
// technique: mount(2) and a fallocate'd filler file), under the checked load.
//   1. F's disk is filled to the last byte: the leader keeps acknowledging (its other follower
//      H holds every acknowledged send), F keeps running (no crash, no restart loop) and falls
//      behind;
//   2. H is killed too: now no follower can hold a write, and the leader must acknowledge none
//      of the sends made straight to it (sync mode's promise); H comes back with its data;
//   3. the filler is removed: F catches up by itself (no restart) to the leader's CommitLog
//      end; a clean restart of F then recovers its log (every record checked) and stays level.
// At the end the checker counts 0 acknowledged sends lost, 0 early, 0 phantom.
//
// Needs mount(2) (root or CAP_SYS_ADMIN); skipped with a message where it is not permitted.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "client/admin.h"
#include "client/producer.h"
#include "failover/broker_groups.h"
#include "failover/history.h"
#include "failover/load.h"
#include "support/fill_disk.h"
#include "support/run_command.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;
using client::AdminClient;
using testing::AwaitTrue;
using testing::History;
using testing::NowMs;

class DiskFullFollowerTest : public testing::BrokerGroupsTest {
 protected:
  void SetUp() override {
    // Whether mount(2) is permitted, before anything starts.
    probe_ = dir_.Join("probe");
    ASSERT_EQ(::mkdir(probe_.c_str(), 0755), 0) << std::strerror(errno);
    if (::mount("tokimq-probe", probe_.c_str(), "tmpfs", 0, "size=1m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs at " << probe_ << " (" << std::strerror(errno)
                   << "): the disk-full follower test needs root or CAP_SYS_ADMIN";
    }
    ::umount2(probe_.c_str(), MNT_DETACH);
    ASSERT_NO_FATAL_FAILURE(BrokerGroupsTest::SetUp());
    group_ = AddGroup("g1", 3);
    ASSERT_FALSE(HasFailure());
  }
  void TearDown() override {
    brokers_.clear();  // the processes go before their mount
    if (!mnt_.empty()) ::umount2(mnt_.c_str(), MNT_DETACH);
  }

  // Moves follower f's data dir onto a fresh 64 MiB tmpfs: stops it (SIGTERM), mounts the tmpfs
  // over its dir with the files copied in, restarts it on its address.
  void MoveToTmpfs(int f, const std::string& dir) {
    ASSERT_EQ(brokers_[f]->Stop(), 0);
    const std::string saved = dir + ".saved";
    ASSERT_EQ(::rename(dir.c_str(), saved.c_str()), 0) << std::strerror(errno);
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << std::strerror(errno);
    ASSERT_EQ(::mount("tokimq-follower", dir.c_str(), "tmpfs", 0, "size=64m"), 0)
        << std::strerror(errno);
    mnt_ = dir;
    auto cp = testing::RunShell("cp -a '" + saved + "/.' '" + dir + "/' 2>&1");
    ASSERT_EQ(cp.exit_code, 0) << cp.out;
    brokers_[f]->set_fixed_port(brokers_[f]->port());
    ASSERT_TRUE(brokers_[f]->Start());
  }
  // Whether broker i's process is still running (not exited; reaps it when it has).
  bool Alive(int i) {
    const pid_t pid = brokers_[i]->pid();
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, WNOHANG) == 0;
  }
  int64_t MaxOffset(int i) {
    auto gs = AdminClient(Quick(i)).GroupStatus();
    return gs.ok() ? gs->max_offset() : -1;
  }

  std::string probe_, mnt_;
  int group_ = -1;
};

TEST_F(DiskFullFollowerTest, LeaderAcksOnlyWhatAFollowerHoldsAndTheFullFollowerCatchesUp) {
  const int leader = Leader(group_);
  ASSERT_GE(leader, 0);
  ASSERT_NO_FATAL_FAILURE(CreateDelayTopic("orders", 2, {group_}));
  ASSERT_TRUE(CaughtUp(group_));
  int full = -1, healthy = -1;
  for (size_t id = 0; id < groups_[group_].members.size(); ++id) {
    const int i = groups_[group_].members[id];
    if (i == leader) continue;
    if (full < 0) {
      full = i;
      ASSERT_NO_FATAL_FAILURE(MoveToTmpfs(i, Dir("g1", static_cast<int>(id))));
    } else {
      healthy = i;
    }
  }
  ASSERT_TRUE(CaughtUp(group_));

  History history;
  testing::CheckedLoad load(AllBrokers(), &history);
  load.Start();
  ASSERT_TRUE(load.AwaitSends(200));

  // 1. F's disk full under load.
  absl::Status filled = testing::FillDisk(mnt_, 0);
  ASSERT_TRUE(filled.ok()) << filled;
  const int64_t filled_at = NowMs();
  ASSERT_TRUE(load.AwaitSends(400)) << "the leader stopped acknowledging with one follower full";
  // Stuck: its end does not move while the leader acknowledges 100 more sends.
  const int64_t stuck_at = MaxOffset(full);
  ASSERT_TRUE(load.AwaitSends(100));
  EXPECT_TRUE(Alive(full)) << "the follower with a full disk exited";
  EXPECT_EQ(MaxOffset(full), stuck_at) << "the full follower's CommitLog grew on a full disk";
  EXPECT_LT(stuck_at, MaxOffset(leader));
  std::printf("follower %d full at CommitLog end %lld (%lld ms after the fill); leader at %lld\n",
              full, static_cast<long long>(stuck_at), static_cast<long long>(NowMs() - filled_at),
              static_cast<long long>(MaxOffset(leader)));

  // 2. H down too: no follower can hold a write, so the leader acknowledges none.
  brokers_[healthy]->Kill();
  client::ClientOptions o = Options(leader);
  o.request_timeout_ms = 5'000;  // past the sync wait (3 s): the leader's own answer
  client::Producer direct(o);
  int acked_without_follower = 0;
  std::string last_error;
  for (int n = 0; n < 2; ++n) {
    client::OutgoingMessage m;
    m.topic = "orders";
    m.body = "d" + std::to_string(n);
    m.delay_ms = 500;
    history.Attempt(m.body, NowMs() + 500);
    auto r = direct.Send(m);
    if (r.ok()) {
      ++acked_without_follower;
      history.SendOk(m.body, r->deliver_at_ms);
    } else {
      last_error = r.status().ToString();
    }
  }
  EXPECT_EQ(acked_without_follower, 0)
      << "the leader acknowledged a sync send that no follower held";
  std::printf("with the only writable follower down: 2 sends, %d acknowledged (%s)\n",
              acked_without_follower, last_error.c_str());
  brokers_[healthy]->set_fixed_port(brokers_[healthy]->port());
  ASSERT_TRUE(brokers_[healthy]->Start());
  ASSERT_TRUE(load.AwaitSends(200)) << "no sends acknowledged after the follower came back";
  EXPECT_TRUE(Alive(full));

  // 3. Space again: F catches up without a restart, then recovers its log after one.
  ASSERT_EQ(::unlink((mnt_ + "/filler").c_str()), 0) << std::strerror(errno);
  const int64_t freed_at = NowMs();
  ASSERT_TRUE(AwaitTrue([&] { return MaxOffset(full) > stuck_at; }, 30s,
                        "the full follower to append again after space came back", 5ms));
  std::printf("follower %d appends again %lld ms after the space came back\n", full,
              static_cast<long long>(NowMs() - freed_at));
  ASSERT_TRUE(load.AwaitSends(200));
  load.Drain();
  EXPECT_TRUE(CaughtUp(group_)) << "the follower did not catch up after space came back";
  EXPECT_EQ(brokers_[full]->Stop(), 0) << "the follower did not shut down cleanly";
  brokers_[full]->set_fixed_port(brokers_[full]->port());
  ASSERT_TRUE(brokers_[full]->Start()) << "the follower's log did not recover";
  EXPECT_TRUE(CaughtUp(group_));
  if (HasFailure()) DumpLogs();

  testing::ExpectSyncGuarantees(history);
}

}  // namespace
}  // namespace tokimq
