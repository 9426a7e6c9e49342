// Consumer-group state at a rejoin (docs/replication.md "Group state at a rejoin",
// docs/formats/group-state-record.md "Snapshot records"): a snapshot replaces a replica's
// group state, and a replica whose CommitLog tail was cut neither keeps that tail's writes nor
// skips the new leader's records at the queue offsets the cut freed. Manual clock, real
// MessageStore + TimerStore + RocksDB per replica (group_state_replica.h); no threads, no
// sleeps. The rejoin's cut is CommitLog::TruncateFiles on the closed store, as RejoinBeforeOpen
// does before the broker opens its stores.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commitlog/commit_log.h"
#include "commitlog/record.h"
#include "consumer/group_state_replica.h"
#include "replication/group_state_log.h"
#include "replication/group_state_record.h"

namespace tokimq::testing {
namespace {

using broker::kGroupStateTopic;
using broker::SnapshotPart;

class GroupStateRejoinTest : public ::testing::Test {
 protected:
  // A follower's pull loop in one step: `from`'s CommitLog into `to` until `to` ends at `upto`
  // (a record boundary; default: `from`'s end).
  static void Copy(Replica& from, Replica& to, std::optional<PhysicalOffset> upto = {}) {
    CommitLog* src = from.backend.store()->commit_log();
    CommitLog* dst = to.backend.store()->commit_log();
    const PhysicalOffset end = upto.value_or(src->MaxOffset());
    while (dst->MaxOffset() < end) {
      auto chunk = src->ReadChunk(dst->MaxOffset(), static_cast<size_t>(end - dst->MaxOffset()));
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      ASSERT_TRUE(to.backend.store()->AppendReplicated(*chunk).ok());
    }
    ASSERT_EQ(dst->MaxOffset(), end);
  }
  // The start of serving of a promoted follower (ServeGroupState + the broker's write hook).
  static void Promote(Replica& r) {
    ASSERT_TRUE(r.log->CatchUp().ok());
    ASSERT_TRUE(r.impl->ReloadState().ok());
    r.log->SetLeading(true);
    r.LogWrites();
    ASSERT_TRUE(r.log->AppendSnapshot().ok());
  }
  // A restart as follower that cuts the CommitLog past `keep` (RejoinBeforeOpen: the timer
  // store's files go too); RocksDB is kept.
  static void Rejoin(Replica& r, PhysicalOffset keep) {
    r.Close();
    auto cut = CommitLog::TruncateFiles(FileSystem::Default(), r.dir + "/store/commitlog",
                                        1 << 20, keep);
    ASSERT_TRUE(cut.ok()) << cut.status();
    ASSERT_GT(*cut, 0);
    for (const auto& e : std::filesystem::directory_iterator(r.dir + "/timer")) {
      std::filesystem::remove_all(e.path());
    }
    r.Open(/*leader=*/false);
  }
  void Send(Replica& r, int n) {
    for (int i = 0; i < n; ++i) {
      Message m;
      m.topic = "t";
      m.body = "m" + std::to_string(i);
      m.born_ms = clock_.NowMs();
      ASSERT_TRUE(r.backend.store()->Put(std::move(m)).ok());
    }
  }
  static int64_t QueueEnd(Replica& r) {
    return r.backend.store()->MaxQueueOffset(kGroupStateTopic, 0).value();
  }
  // A group-state record put straight into `r`'s CommitLog (as if copied from a leader).
  static void PutRecord(Replica& r, const std::map<std::string, std::string>& puts,
                        std::optional<SnapshotPart> part) {
    rocksdb::WriteBatch b;
    for (const auto& [k, v] : puts) ASSERT_TRUE(b.Put(k, v).ok());
    auto body = broker::EncodeGroupStateRecord(b, part);
    ASSERT_TRUE(body.ok()) << body.status();
    Message m;
    m.topic = kGroupStateTopic;
    m.queue_id = 0;
    m.body = *body;
    ASSERT_TRUE(r.backend.store()->Put(std::move(m)).ok());
  }

  TempDir dir_;
  ManualClock clock_{1'700'000'000'000};
};

// The old leader A acks in its diverged tail (group g, and group g2 that nobody else sees),
// B is promoted and serves, A rejoins B (tail cut) and copies B's log: A's group state is B's,
// key for key. B then dies and A is promoted: g2 gets every message (none of A's cut acks
// hides one).
TEST_F(GroupStateRejoinTest, OldLeadersCutTailWritesAreReplacedByTheNewLeadersSnapshot) {
  Replica a(&clock_, dir_.Join("a"), /*leader=*/true);
  Replica b(&clock_, dir_.Join("b"), /*leader=*/false);
  ASSERT_TRUE(a.log->AppendSnapshot().ok());  // A's start of serving
  Send(a, 6);
  auto got = a.Recv(2, 30'000);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(a.svc->Ack("g", got[0].receipt_handle).ok());
  Copy(a, b);
  const PhysicalOffset consistent = b.backend.store()->commit_log()->MaxOffset();
  // A's tail, never copied: g receives m2, m3 and acks m2; g2 receives m0 and acks it.
  auto tail = a.Recv(2, 30'000);
  ASSERT_EQ(tail.size(), 2u);
  ASSERT_TRUE(a.svc->Ack("g", tail[0].receipt_handle).ok());
  auto g2 = a.Recv(1, 30'000, "g2");
  ASSERT_EQ(g2.size(), 1u);
  ASSERT_TRUE(a.svc->Ack("g2", g2[0].receipt_handle).ok());

  Promote(b);  // term 1
  auto more = b.Recv(16, 30'000);
  ASSERT_EQ(more.size(), 4u);  // m2..m5: m0 acked, m1 leased by A in term 0
  EXPECT_EQ(more[0].message.body, "m2");
  ASSERT_TRUE(b.svc->Ack("g", more[1].receipt_handle).ok());

  Rejoin(a, consistent);
  Copy(b, a);
  EXPECT_FALSE(a.log->stale());  // A replayed from its own snapshot, which B holds
  EXPECT_EQ(a.log->replay_next(), QueueEnd(b));
  const auto want = b.GroupKeys();
  ASSERT_GE(want.size(), 3u);
  EXPECT_EQ(a.GroupKeys(), want);

  Promote(a);  // B is gone: term 2
  auto all = a.Recv(16, 30'000, "g2");
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[0].message.body, "m0");
  EXPECT_TRUE(a.Recv(16, 30'000).empty());  // g: m1, m2..m5 leased, m3 acked on B
}

// Three replicas: F copies (and replays) L1's tail that L2 never got; L2 is promoted and writes
// its snapshot and records at the queue offsets F replayed L1's tail from. F rejoins L2: its
// replay position, past the queue's end after the cut, moves back to that end, and it replays
// L2's records, none skipped.
TEST_F(GroupStateRejoinTest, ReplayPositionPastTheCutMovesBackAndNoReusedOffsetIsSkipped) {
  Replica l1(&clock_, dir_.Join("l1"), /*leader=*/true);
  Replica l2(&clock_, dir_.Join("l2"), /*leader=*/false);
  Replica f(&clock_, dir_.Join("f"), /*leader=*/false);
  ASSERT_TRUE(l1.log->AppendSnapshot().ok());
  Send(l1, 4);
  auto got = l1.Recv(1, 30'000);
  ASSERT_EQ(got.size(), 1u);
  Copy(l1, l2);
  const PhysicalOffset consistent = l2.backend.store()->commit_log()->MaxOffset();
  const int64_t consistent_q = QueueEnd(l2);
  // L1's tail: 4 records (receive, ack, receive for g2, ack for g2), copied by F only.
  auto tail = l1.Recv(2, 30'000);
  ASSERT_EQ(tail.size(), 2u);
  ASSERT_TRUE(l1.svc->Ack("g", tail[0].receipt_handle).ok());
  auto g2 = l1.Recv(1, 30'000, "g2");
  ASSERT_EQ(g2.size(), 1u);
  ASSERT_TRUE(l1.svc->Ack("g2", g2[0].receipt_handle).ok());
  Copy(l1, f);
  EXPECT_EQ(f.log->replay_next(), QueueEnd(l1));
  EXPECT_EQ(f.GroupKeys(), l1.GroupKeys());

  Promote(l2);  // its snapshot and 2 records reuse the queue offsets of L1's tail
  auto fresh = l2.Recv(1, 30'000, "g2");
  ASSERT_EQ(fresh.size(), 1u);
  ASSERT_TRUE(l2.svc->Ack("g2", fresh[0].receipt_handle).ok());
  ASSERT_LT(QueueEnd(l2), QueueEnd(l1));  // every record of L2 is at an offset F replayed

  Rejoin(f, consistent);
  EXPECT_EQ(QueueEnd(f), consistent_q);
  Copy(l2, f);
  EXPECT_EQ(f.log->replay_next(), QueueEnd(l2));
  EXPECT_FALSE(f.log->stale());  // L2's snapshot replaced the stale state
  EXPECT_EQ(f.GroupKeys(), l2.GroupKeys());
}

// The stale mark: set when the position is past the end after the cut, kept until a snapshot is
// replayed (records that are not a snapshot do not clear it).
TEST_F(GroupStateRejoinTest, StaleMarkStaysUntilASnapshotIsReplayed) {
  Replica l1(&clock_, dir_.Join("l1"), /*leader=*/true);
  Replica f(&clock_, dir_.Join("f"), /*leader=*/false);
  ASSERT_TRUE(l1.log->AppendSnapshot().ok());
  Send(l1, 2);
  Copy(l1, f);
  const PhysicalOffset consistent = f.backend.store()->commit_log()->MaxOffset();
  ASSERT_EQ(l1.Recv(1, 30'000).size(), 1u);
  Copy(l1, f);
  Rejoin(f, consistent);
  EXPECT_FALSE(f.log->stale());  // checked at the first replay, not at the open
  ASSERT_TRUE(f.log->CatchUp().ok());
  EXPECT_TRUE(f.log->stale());
  EXPECT_EQ(f.log->replay_next(), QueueEnd(f));
  PutRecord(f, {{"group/x", "1"}}, std::nullopt);
  EXPECT_TRUE(f.log->stale());
  PutRecord(f, {{"group/y", "2"}}, SnapshotPart{0, 1});
  EXPECT_FALSE(f.log->stale());
  EXPECT_EQ(f.GroupKeys(), (std::map<std::string, std::string>{{"group/y", "2"}}));
}

// A snapshot in parts replaces the state only once every part is there; a snapshot whose writer
// stopped before its last part is skipped, its parts too.
TEST_F(GroupStateRejoinTest, SnapshotInPartsReplacesWhenWholeAndAnAbandonedOneIsSkipped) {
  Replica f(&clock_, dir_.Join("f"), /*leader=*/false);
  const auto secret = f.GroupKeys();  // the handle secret its service made at the open
  PutRecord(f, {{"group/x", "1"}, {"group/y", "1"}}, std::nullopt);
  EXPECT_EQ(f.log->replay_next(), 1);
  PutRecord(f, {{"group/a", "1"}}, SnapshotPart{0, 2});
  EXPECT_EQ(f.log->replay_next(), 1);  // waits for part 1
  EXPECT_EQ(f.GroupKeys().count("group/a"), 0u);
  EXPECT_EQ(f.GroupKeys().count("group/x"), 1u);
  PutRecord(f, {{"group/b", "1"}}, SnapshotPart{1, 2});
  EXPECT_EQ(f.log->replay_next(), 3);
  EXPECT_EQ(f.GroupKeys(),
            (std::map<std::string, std::string>{{"group/a", "1"}, {"group/b", "1"}}));
  EXPECT_FALSE(secret.empty());  // replaced too: a snapshot carries the leader's secret
  // Parts 0 and 1 of 3, then another leader's one-part snapshot.
  PutRecord(f, {{"group/c", "1"}}, SnapshotPart{0, 3});
  PutRecord(f, {{"group/d", "1"}}, SnapshotPart{1, 3});
  EXPECT_EQ(f.log->replay_next(), 3);
  PutRecord(f, {{"group/e", "1"}}, SnapshotPart{0, 1});
  EXPECT_EQ(f.log->replay_next(), 6);
  EXPECT_EQ(f.GroupKeys(), (std::map<std::string, std::string>{{"group/e", "1"}}));
}

// --- the snapshot header of the record body (docs/formats/group-state-record.md) ---

TEST(GroupStateSnapshotRecordTest, WorkedExampleOfTheFormatDocument) {
  rocksdb::WriteBatch in;
  ASSERT_TRUE(in.Put("group/a", "xy").ok());
  auto body = broker::EncodeGroupStateRecord(in, SnapshotPart{0, 2});
  ASSERT_TRUE(body.ok());
  const std::string expected(
      "\x01"                                           // version
      "\x02\x00\x00\x00"                               // count 2
      "\x03" "\x00\x00\x00\x00" "\x02\x00\x00\x00"     // snapshot part 0 of 2
      "\x01" "\x07\x00\x00\x00" "group/a" "\x02\x00\x00\x00" "xy",  // put
      1 + 4 + 9 + 1 + 4 + 7 + 4 + 2);
  EXPECT_EQ(*body, expected);
  rocksdb::WriteBatch out;
  std::optional<SnapshotPart> part;
  ASSERT_TRUE(broker::DecodeGroupStateRecord(*body, &out, &part).ok());
  ASSERT_TRUE(part.has_value());
  EXPECT_EQ(*part, (SnapshotPart{0, 2}));
  EXPECT_EQ(out.Count(), 1u);
  // An ordinary record decodes with no part.
  auto plain = broker::EncodeGroupStateRecord(in);
  ASSERT_TRUE(broker::DecodeGroupStateRecord(*plain, &out, &part).ok());
  EXPECT_FALSE(part.has_value());
}

TEST(GroupStateSnapshotRecordTest, EmptyStateIsOneHeaderOnlyPart) {
  rocksdb::WriteBatch empty;
  auto body = broker::EncodeGroupStateRecord(empty, SnapshotPart{0, 1});
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, std::string("\x01\x01\x00\x00\x00\x03\x00\x00\x00\x00\x01\x00\x00\x00", 14));
  rocksdb::WriteBatch out;
  std::optional<SnapshotPart> part;
  ASSERT_TRUE(broker::DecodeGroupStateRecord(*body, &out, &part).ok());
  EXPECT_EQ(out.Count(), 0u);
  EXPECT_EQ(*part, (SnapshotPart{0, 1}));
  EXPECT_EQ(broker::EncodeGroupStateRecord(empty, SnapshotPart{1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GroupStateSnapshotRecordTest, EveryTruncationAndBadHeaderIsDataLossAndAddsNothing) {
  rocksdb::WriteBatch in;
  ASSERT_TRUE(in.Put("group/a", "xy").ok());
  const std::string body = *broker::EncodeGroupStateRecord(in, SnapshotPart{1, 2});
  for (size_t n = 0; n < body.size(); ++n) {
    rocksdb::WriteBatch out;
    std::optional<SnapshotPart> part;
    EXPECT_EQ(broker::DecodeGroupStateRecord(body.substr(0, n), &out, &part).code(),
              absl::StatusCode::kDataLoss)
        << "truncated to " << n;
    EXPECT_EQ(out.Count(), 0u);
    EXPECT_FALSE(part.has_value());
  }
  auto decode = [](const std::string& b) {
    rocksdb::WriteBatch out;
    absl::Status s = broker::DecodeGroupStateRecord(b, &out);
    EXPECT_EQ(out.Count(), 0u);
    return s.code();
  };
  std::string bad = body;
  bad[6] = 2;  // part 2 of 2
  EXPECT_EQ(decode(bad), absl::StatusCode::kDataLoss);
  bad = body;
  bad[10] = 0;  // parts 0
  EXPECT_EQ(decode(bad), absl::StatusCode::kDataLoss);
  // The header anywhere but first.
  const std::string plain = *broker::EncodeGroupStateRecord(in);
  std::string second = plain;
  second[1] = 2;  // count 2
  second += std::string("\x03\x00\x00\x00\x00\x01\x00\x00\x00", 9);
  EXPECT_EQ(decode(second), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tokimq::testing

namespace tokimq::testing {
namespace {

// docs/replication.md "A follower behind the leader's retention": the snapshot a leader moves
// ahead of its retention (CompactSnapshot) is its last snapshot folded with every record after
// it, so a replica that holds only the new snapshot and the records that follow it (one that
// started its CommitLog at the leader's oldest segment) replays the leader's state key for key.
TEST_F(GroupStateRejoinTest, CompactedSnapshotAndTheRecordsAfterItHoldTheLeadersState) {
  Replica a(&clock_, dir_.Join("a"), /*leader=*/true);
  ASSERT_TRUE(a.log->AppendSnapshot().ok());
  const int64_t first_snapshot = a.log->snapshot_queue_offset();
  Send(a, 8);
  auto got = a.Recv(4, 30'000);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_TRUE(a.svc->Ack("g", got[0].receipt_handle).ok());
  ASSERT_TRUE(a.svc->Ack("g", got[2].receipt_handle).ok());
  ASSERT_TRUE(a.log->CompactSnapshot().ok());
  const int64_t compacted = a.log->snapshot_queue_offset();
  EXPECT_GT(compacted, first_snapshot + 2);  // past the first snapshot and the records after it
  EXPECT_EQ(a.log->replay_next(), compacted);
  // Writes after the new snapshot.
  auto g2 = a.Recv(2, 30'000, "g2");
  ASSERT_EQ(g2.size(), 2u);
  ASSERT_TRUE(a.svc->Ack("g2", g2[0].receipt_handle).ok());
  ASSERT_TRUE(a.svc->Ack("g", got[1].receipt_handle).ok());

  Replica f(&clock_, dir_.Join("f"), /*leader=*/false);
  std::vector<std::string> bodies;
  auto n = a.backend.store()->VisitQueue(kGroupStateTopic, 0, QueueOffset(compacted), 1000,
                                         [&](const record::RecordView& v) {
                                           bodies.emplace_back(v.body);
                                           return absl::OkStatus();
                                         });
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(static_cast<int64_t>(bodies.size()), QueueEnd(a) - compacted);
  for (const std::string& body : bodies) {
    Message m;
    m.topic = kGroupStateTopic;
    m.queue_id = 0;
    m.body = body;
    ASSERT_TRUE(f.backend.store()->Put(std::move(m)).ok());
  }
  const auto want = a.GroupKeys();
  ASSERT_GE(want.size(), 4u);
  EXPECT_EQ(f.GroupKeys(), want);
  EXPECT_FALSE(f.log->stale());
  EXPECT_EQ(f.log->replay_next(), static_cast<int64_t>(bodies.size()));
}

// A replica that is not leading writes no snapshot when asked to move one.
TEST_F(GroupStateRejoinTest, CompactSnapshotWritesNothingOnAFollower) {
  Replica f(&clock_, dir_.Join("f"), /*leader=*/false);
  ASSERT_TRUE(f.log->CompactSnapshot().ok());
  EXPECT_EQ(QueueEnd(f), 0);
  EXPECT_EQ(f.log->snapshot_queue_offset(), -1);
}

}  // namespace
}  // namespace tokimq::testing
