// A replica whose consumer-group state is marked stale refuses a manual promote
// (docs/replication.md "A stale replica does not lead"): a whole broker in process, as a
// follower of an unreachable leader; its replay position is put past its group-state queue's
// end while it is closed (what a rejoin cut of records it had replayed leaves), so its own
// check marks the state stale. replication_role promote is refused with FAILED_PRECONDITION
// naming the stale state; with force it leads, and its start of serving clears the mark.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <memory>
#include <string>

#include "broker/broker.h"
#include "common/clock.h"
#include "consumer/group_state.h"
#include "proto/tokimq.pb.h"
#include "replication/group_state_log.h"
#include "test_util.h"

namespace tokimq::broker {
namespace {

class StaleReplicaPromoteTest : public ::testing::Test {
 protected:
  void Open() {
    BrokerOptions o;
    o.data_dir = dir_.path();
    o.clock = &clock_;
    o.timer_thread_nice = 0;
    o.retention_interval_ms = 0;
    o.disk_max_used_ratio = 1.0;  // no watermark: the test machine's disk may be fuller
    o.broker_id = 1;
    o.replicate_from = "127.0.0.1:1";  // nobody: the follower copies nothing
    auto b = Broker::Open(o);
    ASSERT_TRUE(b.ok()) << b.status();
    broker_ = std::move(*b);
  }
  // The replay position past the (empty) group-state queue, written while the broker is closed.
  void PutReplayPositionPastTheQueueEnd() {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options opts;
    ASSERT_TRUE(rocksdb::DB::Open(opts, dir_.path() + "/meta", &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), kReplayNextKey,
                        consumer::EncodeOffsetValue(kReplayNextKey, 5))
                    .ok());
    ASSERT_TRUE(db->Close().ok());
  }
  proto::Response Role(bool promote, bool force, int64_t term) {
    proto::Request req;
    req.mutable_replication_role()->set_promote(promote);
    req.mutable_replication_role()->set_force(force);
    req.mutable_replication_role()->set_term(term);
    proto::Response resp;
    broker_->Handle(req, &resp);
    return resp;
  }

  testing::TempDir dir_;
  ManualClock clock_{1'700'000'000'000};
  std::unique_ptr<Broker> broker_;
};

TEST_F(StaleReplicaPromoteTest, PromoteIsRefusedUnlessForcedAndForceClearsTheMark) {
  Open();
  ASSERT_TRUE(broker_->Close().ok());
  broker_.reset();
  PutReplayPositionPastTheQueueEnd();
  Open();

  proto::Request status;
  status.mutable_group_status();
  proto::Response st;
  broker_->Handle(status, &st);
  EXPECT_TRUE(st.group_status().group_state_stale());

  proto::Response refused = Role(/*promote=*/true, /*force=*/false, 1);
  EXPECT_EQ(refused.status().code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(refused.status().message().find("marked stale"), std::string::npos)
      << refused.status().message();
  proto::Response still = Role(false, false, 0);  // only reports
  EXPECT_EQ(still.replication_role().role(), "follower");
  EXPECT_TRUE(still.replication_role().group_state_stale());

  proto::Response forced = Role(/*promote=*/true, /*force=*/true, 1);
  EXPECT_EQ(forced.status().code(), 0) << forced.status().message();
  EXPECT_EQ(forced.replication_role().role(), "leader");
  EXPECT_EQ(forced.replication_role().term(), 1);
  // Its snapshot (start of serving) replaced the replayed position and cleared the mark.
  proto::Response after = Role(false, false, 0);
  EXPECT_FALSE(after.replication_role().group_state_stale());
}

// Without the replay position past the end the same replica promotes without force.
TEST_F(StaleReplicaPromoteTest, AFreshFollowerPromotesWithoutForce) {
  Open();
  proto::Response promoted = Role(/*promote=*/true, /*force=*/false, 1);
  EXPECT_EQ(promoted.status().code(), 0) << promoted.status().message();
  EXPECT_EQ(promoted.replication_role().role(), "leader");
  EXPECT_FALSE(promoted.replication_role().group_state_stale());
}

}  // namespace
}  // namespace tokimq::broker
