// Consumer-group state replication (issue 20 item 1, docs/replication.md "Consumer-group
// state"): a leader's ConsumerService logs each group-state batch into its CommitLog
// (GroupStateLog::Append through ConsumerServiceDeps::log_state_write); the follower copies the
// CommitLog byte for byte (ReadChunk / AppendReplicated), replays the records at dispatch
// (GroupStateLog::CatchUp) and, promoted, reloads its ConsumerService (ReloadState). Manual
// clock, real MessageStore + TimerStore + RocksDB on both sides; no threads, no sleeps.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "broker/consumer_service.h"
#include "common/clock.h"
#include "consumer/consumer_env.h"
#include "consumer/consumer_service_impl.h"
#include "consumer/group_state_replica.h"
#include "replication/group_state_log.h"
#include "replication/group_state_record.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"
#include "test_util.h"

namespace tokimq::testing {
namespace {

using broker::GroupStateLog;
using broker::kGroupStateTopic;

class GroupStateReplicationTest : public ::testing::Test {
 protected:
  GroupStateReplicationTest()
      : leader_(&clock_, dir_.Join("leader"), true),
        follower_(&clock_, dir_.Join("follower"), false) {}

  void SendToLeader(int n) {
    for (int i = 0; i < n; ++i) {
      Message m;
      m.topic = "t";
      m.body = "m" + std::to_string(i);
      m.born_ms = clock_.NowMs();
      ASSERT_TRUE(leader_.backend.store()->Put(std::move(m)).ok());
    }
  }
  // The follower's pull loop, in one step: chunks of the leader's CommitLog until it holds all.
  void CopyLog() {
    CommitLog* from = leader_.backend.store()->commit_log();
    CommitLog* to = follower_.backend.store()->commit_log();
    while (to->MaxOffset().value() < from->MaxOffset().value()) {
      auto chunk = from->ReadChunk(to->MaxOffset(), 4096);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      ASSERT_TRUE(follower_.backend.store()->AppendReplicated(*chunk).ok());
    }
  }
  // A leader's work: 5 messages; 3 received (30 s leases), the first acked, the second renewed
  // to 60 s, the third nacked (retry copy, attempt 2 in 10 s).
  void LeaderConsumes() {
    SendToLeader(5);
    got_ = leader_.Recv(3, 30'000);
    ASSERT_EQ(got_.size(), 3u);
    ASSERT_TRUE(leader_.svc->Ack("g", got_[0].receipt_handle).ok());
    auto renewed = leader_.svc->ChangeInvisibleDuration("g", got_[1].receipt_handle, 60'000);
    ASSERT_TRUE(renewed.ok()) << renewed.status();
    renewed_handle_ = *renewed;
    ASSERT_TRUE(leader_.svc->Nack("g", got_[2].receipt_handle, std::nullopt).ok());
  }

  TempDir dir_;
  ManualClock clock_{1'700'000'000'000};
  Replica leader_;
  Replica follower_;
  std::vector<ReceivedMessage> got_;
  std::string renewed_handle_;
};

TEST_F(GroupStateReplicationTest, FollowerReplaysTheLeadersGroupStateKeyForKey) {
  ASSERT_TRUE(leader_.log->AppendSnapshot().ok());  // as at the start of serving
  LeaderConsumes();
  CopyLog();
  const auto leader_keys = leader_.GroupKeys();
  // Progress, the lease block (the renewed lease), the handle secret, the retry queue's state.
  ASSERT_GE(leader_keys.size(), 3u);
  EXPECT_EQ(follower_.GroupKeys(), leader_keys);
  // One record per write: the snapshot, the receive, the ack, the renewal, the nack.
  EXPECT_EQ(follower_.log->replay_next(),
            leader_.backend.store()->MaxQueueOffset(kGroupStateTopic, 0).value());
  EXPECT_EQ(follower_.log->replay_next(), 5);
}

TEST_F(GroupStateReplicationTest, SnapshotCarriesStateWrittenBeforeLogging) {
  // The handle secret was written when the leader's service opened (before anything was
  // logged): only the snapshot at the start of serving brings it to the follower.
  ASSERT_TRUE(leader_.log->AppendSnapshot().ok());
  CopyLog();
  EXPECT_EQ(follower_.GroupKeys(), leader_.GroupKeys());
  EXPECT_EQ(follower_.GroupKeys().count("group/%sys/handle_secret"), 1u);
}

TEST_F(GroupStateReplicationTest, PromotedFollowerKeepsAcksLeasesAndReceiptHandles) {
  ASSERT_TRUE(leader_.log->AppendSnapshot().ok());
  LeaderConsumes();
  CopyLog();
  // Promotion: replay what is left, reload the service's memory from the replayed keys.
  ASSERT_TRUE(follower_.log->CatchUp().ok());
  ASSERT_TRUE(follower_.impl->ReloadState().ok());
  EXPECT_EQ(follower_.svc->InFlight("g"), 1);  // the renewed lease
  // Only the two messages never handed out: the acked one is done, the renewed one is leased.
  auto next = follower_.Recv(16, 30'000);
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0].message.body, "m3");
  EXPECT_EQ(next[1].message.body, "m4");
  // The old leader's receipt handles: the renewed one acks here, the acked one is stale.
  EXPECT_TRUE(follower_.svc->Ack("g", renewed_handle_).ok());
  EXPECT_EQ(follower_.svc->Ack("g", got_[0].receipt_handle).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(follower_.svc->InFlight("g"), 2);
}

TEST_F(GroupStateReplicationTest, LeaseOfTheOldLeaderExpiresOnTheNewOneAtItsOwnTime) {
  ASSERT_TRUE(leader_.log->AppendSnapshot().ok());
  SendToLeader(1);
  auto got = leader_.Recv(1, 30'000);
  ASSERT_EQ(got.size(), 1u);
  CopyLog();
  ASSERT_TRUE(follower_.impl->ReloadState().ok());
  clock_.AdvanceMs(29'999);
  ASSERT_TRUE(follower_.svc->RunUntilIdle().ok());
  EXPECT_TRUE(follower_.Recv(16, 30'000).empty());  // still leased
  clock_.AdvanceMs(1);
  ASSERT_TRUE(follower_.svc->RunUntilIdle().ok());
  // Expired: its retry copy waits in the follower's timer store (first backoff 10 s).
  EXPECT_EQ(follower_.svc->InFlight("g"), 0);
  EXPECT_EQ(follower_.svc->Ack("g", got[0].receipt_handle).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(GroupStateReplicationTest, CatchUpAtTheEndChangesNothing) {
  LeaderConsumes();
  // The replay position is persisted with each replayed record.
  CopyLog();
  const int64_t next = follower_.log->replay_next();
  EXPECT_EQ(next, 4);
  // A second CatchUp finds nothing to do and changes nothing.
  const auto before = follower_.GroupKeys();
  ASSERT_TRUE(follower_.log->CatchUp().ok());
  EXPECT_EQ(follower_.log->replay_next(), next);
  EXPECT_EQ(follower_.GroupKeys(), before);
}

// --- the record body (docs/formats/group-state-record.md) ---

TEST(GroupStateRecordTest, RoundTripKeepsOperationsInOrder) {
  rocksdb::WriteBatch in;
  ASSERT_TRUE(in.Put("group/g/p/t/t/0", "v1").ok());
  ASSERT_TRUE(in.Delete("group/g/b/t/t/0/00000000000000000000").ok());
  ASSERT_TRUE(in.Put("group/g/p/t/t/0", "v2").ok());
  auto body = broker::EncodeGroupStateRecord(in);
  ASSERT_TRUE(body.ok()) << body.status();
  rocksdb::WriteBatch out;
  ASSERT_TRUE(broker::DecodeGroupStateRecord(*body, &out).ok());
  EXPECT_EQ(out.Count(), 3u);
  // Same operations, same order: the re-encoded body is identical.
  EXPECT_EQ(*broker::EncodeGroupStateRecord(out), *body);
}

TEST(GroupStateRecordTest, WorkedExampleOfTheFormatDocument) {
  rocksdb::WriteBatch in;
  ASSERT_TRUE(in.Put("group/a", "xy").ok());
  ASSERT_TRUE(in.Delete("group/b").ok());
  auto body = broker::EncodeGroupStateRecord(in);
  ASSERT_TRUE(body.ok());
  const std::string expected(
      "\x01"                          // version
      "\x02\x00\x00\x00"              // count 2
      "\x01" "\x07\x00\x00\x00" "group/a" "\x02\x00\x00\x00" "xy"  // put
      "\x02" "\x07\x00\x00\x00" "group/b",                          // delete
      1 + 4 + 1 + 4 + 7 + 4 + 2 + 1 + 4 + 7);
  EXPECT_EQ(*body, expected);
}

TEST(GroupStateRecordTest, EncoderRefusesKeysOutsideGroupStateAndEmptyBatches) {
  rocksdb::WriteBatch outside;
  ASSERT_TRUE(outside.Put("broker/subscription/x", "").ok());
  EXPECT_EQ(broker::EncodeGroupStateRecord(outside).status().code(),
            absl::StatusCode::kInvalidArgument);
  rocksdb::WriteBatch empty;
  EXPECT_EQ(broker::EncodeGroupStateRecord(empty).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GroupStateRecordTest, EveryTruncationAndCorruptionIsDataLossAndAddsNothing) {
  rocksdb::WriteBatch in;
  ASSERT_TRUE(in.Put("group/a", "xy").ok());
  ASSERT_TRUE(in.Delete("group/b").ok());
  const std::string body = *broker::EncodeGroupStateRecord(in);
  for (size_t n = 0; n < body.size(); ++n) {
    rocksdb::WriteBatch out;
    EXPECT_EQ(broker::DecodeGroupStateRecord(body.substr(0, n), &out).code(),
              absl::StatusCode::kDataLoss)
        << "truncated to " << n;
    EXPECT_EQ(out.Count(), 0u);
  }
  auto corrupt = [&](size_t at, char c) {
    std::string b = body;
    b[at] = c;
    rocksdb::WriteBatch out;
    absl::Status s = broker::DecodeGroupStateRecord(b, &out);
    EXPECT_EQ(out.Count(), 0u);
    return s.code();
  };
  EXPECT_EQ(corrupt(0, 2), absl::StatusCode::kDataLoss);    // unknown version
  EXPECT_EQ(corrupt(1, 0), absl::StatusCode::kDataLoss);    // count 0
  EXPECT_EQ(corrupt(5, 3), absl::StatusCode::kDataLoss);    // unknown op
  EXPECT_EQ(corrupt(10, 'G'), absl::StatusCode::kDataLoss); // key outside group/
  rocksdb::WriteBatch out;
  EXPECT_EQ(broker::DecodeGroupStateRecord(body + "x", &out).code(),
            absl::StatusCode::kDataLoss);  // trailing bytes
}

// The count is checked against the body before anything is allocated for it (the
// group_state_record fuzzer's finding: a 16-byte body asking for 117 M operations reserved
// 4.6 GB; fuzz/corpus/group_state_record/regress-oom-huge-count).
TEST(GroupStateRecordTest, CountBeyondWhatTheBodyHoldsIsRefusedBeforeAllocating) {
  rocksdb::WriteBatch in;
  ASSERT_TRUE(in.Put("group/a", "xy").ok());
  ASSERT_TRUE(in.Delete("group/b").ok());
  std::string body = *broker::EncodeGroupStateRecord(in);
  for (const uint32_t count : {3u, 0x070000FFu, 0xFFFFFFFFu}) {
    std::string b = body;
    b[1] = static_cast<char>(count & 0xFF);
    b[2] = static_cast<char>((count >> 8) & 0xFF);
    b[3] = static_cast<char>((count >> 16) & 0xFF);
    b[4] = static_cast<char>(count >> 24);
    rocksdb::WriteBatch out;
    absl::Status s = broker::DecodeGroupStateRecord(b, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << count;
    EXPECT_NE(s.message().find("more operations than the body holds"), absl::string_view::npos)
        << count << ": " << s;
    EXPECT_EQ(out.Count(), 0u);
  }
}

}  // namespace
}  // namespace tokimq::testing
