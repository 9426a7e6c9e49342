// docs/operations.md "An OK Ack is final across broker crashes": the group-state WAL is fsynced
// every kWalSyncIntervalMs (50 ms), so a power loss undoes at most the group-state changes of
// the last ~50 ms. A whole broker runs in process on a ManualClock, with a fault-injecting file
// system under the stores (common/fault_injection_fs.h) and one under the metadata RocksDB
// (broker/rocksdb_fault_injection_fs.h); the power goes off at a chosen moment (nothing written
// after it reaches the disk, unsynced data is dropped) and the broker reopens on what is left.
// No sleeps: the test advances the clock and waits for the WAL syncer's fsync event.
#include <gtest/gtest.h>
#include <rocksdb/env.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/rocksdb_fault_injection_fs.h"
#include "common/clock.h"
#include "common/fault_injection_fs.h"
#include "proto/tokimq.pb.h"
#include "test_util.h"

namespace tokimq::broker {
namespace {

constexpr int64_t kStartMs = 1'700'000'000'000;
constexpr int64_t kSyncIntervalMs = 50;  // consumer_service_impl.h kWalSyncIntervalMs
constexpr int kMessages = 10;
constexpr char kTopic[] = "orders";
constexpr char kGroup[] = "billing";

class GroupStatePowerLossTest : public ::testing::Test {
 protected:
  void Open() {
    rocks_fs_ = std::make_shared<RocksDbFaultInjectionFs>();
    rocks_env_ = rocksdb::NewCompositeEnv(rocks_fs_);
    BrokerOptions o;
    o.data_dir = dir_.path();
    o.clock = &clock_;
    o.fs = &fs_;
    o.meta_env = rocks_env_.get();
    o.flush_mode = FlushMode::kSync;  // sends are durable: only group state is in question
    o.timer_thread_nice = 0;
    o.retention_interval_ms = 0;
    o.disk_max_used_ratio = 1.0;  // no watermark: the test machine's disk may be fuller
    auto b = Broker::Open(o);
    ASSERT_TRUE(b.ok()) << b.status();
    broker_ = std::move(*b);
  }

  // The power goes off: nothing more reaches either disk; the broker's threads and files are
  // then stopped and closed (their writes fail) and the unsynced data dropped.
  void PowerLoss() {
    rocks_fs_->SetActive(false);
    fs_.SetNoSpace(true);
    fs_.SetFailSync(true);
    broker_.reset();
    ASSERT_TRUE(rocks_fs_->DropUnsyncedData().ok());
    absl::Status s = fs_.DropUnsyncedData();
    ASSERT_TRUE(s.ok()) << s;
    fs_.ClearFaults();
  }

  proto::Response Call(proto::Request req) {
    proto::Response resp;
    broker_->Handle(req, &resp);
    return resp;
  }

  void CreateTopicAndSend() {
    proto::Request create;
    create.mutable_create_topic()->mutable_topic()->set_name(kTopic);
    create.mutable_create_topic()->mutable_topic()->set_queues(1);
    create.mutable_create_topic()->mutable_topic()->set_type(proto::NORMAL);
    proto::Response created = Call(create);
    ASSERT_EQ(created.status().code(), 0) << created.status().message();
    proto::Request send;
    for (int i = 0; i < kMessages; ++i) {
      proto::SendEntry* e = send.mutable_send()->add_entries();
      e->set_topic(kTopic);
      e->set_body("m" + std::to_string(i));
    }
    proto::Response sent = Call(send);
    ASSERT_EQ(sent.status().code(), 0) << sent.status().message();
  }

  std::vector<proto::ReceivedMessage> ReceiveAll() {
    proto::Request req;
    req.mutable_receive()->set_group(kGroup);
    req.mutable_receive()->set_topic(kTopic);
    req.mutable_receive()->set_max_messages(kMessages);
    req.mutable_receive()->set_invisible_ms(600'000);
    proto::Response resp = Call(req);
    EXPECT_EQ(resp.status().code(), 0) << resp.status().message();
    return {resp.receive().messages().begin(), resp.receive().messages().end()};
  }

  // The status code of acking `m` (the request's own status when it failed as a whole).
  int AckCode(const proto::ReceivedMessage& m) {
    proto::Request req;
    req.mutable_ack()->set_group(kGroup);
    req.mutable_ack()->add_receipt_handles(m.receipt_handle());
    proto::Response resp = Call(req);
    if (resp.status().code() != 0 || resp.ack().results_size() != 1) return resp.status().code();
    return resp.ack().results(0).code();
  }
  void Ack(const proto::ReceivedMessage& m) { ASSERT_EQ(AckCode(m), 0); }

  int64_t InFlight() {
    proto::Request req;
    req.mutable_stats();
    proto::Response resp = Call(req);
    EXPECT_EQ(resp.status().code(), 0);
    for (const proto::GroupStats& g : resp.stats().groups()) {
      if (g.group() == kGroup) return g.in_flight();
    }
    return 0;
  }

  // Advances the clock by `ms`; when that reaches the WAL syncer's next deadline, waits (on
  // its fsync, not on time) until the syncer has synced what was written before.
  void Advance(int64_t ms) {
    const uint64_t syncs = rocks_fs_->sync_count();
    const bool due = (clock_.NowMs() - kStartMs) / kSyncIntervalMs !=
                     (clock_.NowMs() + ms - kStartMs) / kSyncIntervalMs;
    clock_.AdvanceMs(ms);
    if (due) {
      ASSERT_TRUE(rocks_fs_->WaitForSyncCount(syncs + 1, std::chrono::seconds(30)))
          << "no group-state WAL sync at " << clock_.NowMs() - kStartMs << " ms";
    }
  }

  testing::TempDir dir_;
  ManualClock clock_{kStartMs};
  FaultInjectionFileSystem fs_;
  std::shared_ptr<RocksDbFaultInjectionFs> rocks_fs_;
  std::unique_ptr<rocksdb::Env> rocks_env_;
  std::unique_ptr<Broker> broker_;
};

// Ten messages leased at t=0; one acked every 10 ms from t=10 to t=100 (syncs at t=50 and
// t=100, before that tick's ack); power loss at t=140. Every ack older than 50 ms survives
// (0..8, at t <= 90); the ack at t=100, 40 ms old and written after the last sync, is undone:
// its message is leased again after the restart (in flight), the others stay acked.
TEST_F(GroupStatePowerLossTest, PowerLossUndoesOnlyTheLast50MsOfAcks) {
  Open();
  CreateTopicAndSend();
  std::vector<proto::ReceivedMessage> got = ReceiveAll();
  ASSERT_EQ(got.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    Advance(10);
    Ack(got[i]);
  }
  ASSERT_EQ(InFlight(), 0);
  Advance(40);  // t = 140: the next sync would be at t = 150
  PowerLoss();

  Open();
  EXPECT_EQ(InFlight(), 1);
  // The undone ack's lease is back under its old receipt handle: acking it again succeeds;
  // the surviving acks are final (a second ack of those handles is refused).
  EXPECT_EQ(AckCode(got[kMessages - 1]), 0);
  for (int i = 0; i < kMessages - 1; ++i) {
    EXPECT_EQ(AckCode(got[i]), static_cast<int>(absl::StatusCode::kFailedPrecondition)) << i;
  }
  EXPECT_EQ(InFlight(), 0);
}

// The receive itself (the leases) was synced at t=50 and survives a power loss at t=60; an ack
// at t=60 does not (no sync since): all ten are in flight after the restart.
TEST_F(GroupStatePowerLossTest, LeasesSyncedBeforeThePowerLossSurviveIt) {
  Open();
  CreateTopicAndSend();
  std::vector<proto::ReceivedMessage> got = ReceiveAll();
  ASSERT_EQ(got.size(), static_cast<size_t>(kMessages));
  Advance(50);
  Advance(10);
  Ack(got[0]);
  PowerLoss();

  Open();
  EXPECT_EQ(InFlight(), kMessages);
}

}  // namespace
}  // namespace tokimq::broker
