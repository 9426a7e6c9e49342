// Sync replication's lease path without a thread per request (issue 20, docs/replication.md
// "Consumer-group state"): with replication = sync, receive and ack are answered once a follower
// holds their group-state records, from the ack tracker (Connection::CompleteWhenReplicated),
// not by a worker thread blocked on the wait. Real leader + sync follower on loopback; the
// leader runs ONE worker thread and ONE I/O thread, so a design that blocks a worker per
// request starves the follower's pulls (they run on that worker) and every wait times out.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "broker_process.h"
#include "client/admin.h"
#include "client/connection.h"
#include "client/producer.h"
#include "proto/status.h"
#include "replication_support.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::OutgoingMessage;
using client::Producer;
using testing::BrokerProcess;
using Clock = std::chrono::steady_clock;

constexpr int64_t kAckTimeoutMs = 4000;  // the leader's replication_ack_timeout

// Answers of CallAsync requests, collected from the client's reading thread.
class Answers {
 public:
  client::ResponseCallback Slot(int i) {
    return [this, i](absl::StatusOr<proto::Response> r) {
      std::lock_guard<std::mutex> l(mu_);
      got_[i] = std::move(r);
      at_[i] = Clock::now();
      ++done_;
      cv_.notify_all();
    };
  }
  void Resize(int n) {
    got_.assign(n, absl::UnknownError("no answer"));
    at_.assign(n, Clock::time_point());
  }
  // Waits (bounded real time) until `n` answers arrived; false on timeout.
  bool AwaitAll(int n, std::chrono::milliseconds within) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, within, [&] { return done_ >= n; });
  }
  absl::StatusOr<proto::Response> Get(int i) {
    std::lock_guard<std::mutex> l(mu_);
    return got_[i];
  }
  Clock::time_point At(int i) {
    std::lock_guard<std::mutex> l(mu_);
    return at_[i];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int done_ = 0;
  std::vector<absl::StatusOr<proto::Response>> got_;
  std::vector<Clock::time_point> at_;
};

// The broker's status in `r` (a transport error as is).
absl::Status StatusOf(const absl::StatusOr<proto::Response>& r) {
  if (!r.ok()) return r.status();
  if (r->has_status()) return wire::FromProto(r->status());
  return absl::OkStatus();
}

// `encoded`: the native fast path (Broker::HandleReceiveFrame), else Broker::Handle.
proto::Request ReceiveRequest(int max_messages, bool encoded = false) {
  proto::Request req;
  auto* r = req.mutable_receive();
  r->set_group("g");
  r->set_topic("orders");
  r->set_max_messages(max_messages);
  r->set_invisible_ms(60'000);
  r->set_long_poll_ms(0);
  r->set_encoded_properties(encoded);
  return req;
}

proto::Request AckRequest(const std::string& handle) {
  proto::Request req;
  req.mutable_ack()->set_group("g");
  req.mutable_ack()->add_receipt_handles(handle);
  return req;
}

class SyncLeaseTest : public testing::ReplicaGroupTest {
 protected:
  void SetUp() override {
    const std::string cfg = dir_.Join("leader.toml");
    std::ofstream(cfg) << "worker_threads = 1\nio_threads = 1\nreplication_ack_timeout = \""
                       << kAckTimeoutMs << "ms\"\n";
    leader_ = StartReplica("a", 0, "", {"-c", cfg, "--replication", "sync"});
    follower_ = StartReplica("b", 1, Address(*leader_), {"--replication", "sync"});
    for (BrokerProcess* b : {leader_.get(), follower_.get()}) {
      // Topic metadata is not replicated (docs/replication.md): created on both.
      ASSERT_TRUE(testing::CreateTopic(*b, "orders", proto::NORMAL, 4).ok());
    }
  }
  void SendMessages(int n) {
    Producer producer(leader_->Options());
    for (int i = 0; i < n; ++i) {
      OutgoingMessage m;
      m.topic = "orders";
      m.body = "m" + std::to_string(i);
      absl::Status s = producer.Send(m).status();  // sync: the follower holds it
      ASSERT_TRUE(s.ok()) << i << ": " << s;
    }
  }

  std::unique_ptr<BrokerProcess> leader_;
  std::unique_ptr<BrokerProcess> follower_;
};

// 48 receives, then 96 acks, each batch pipelined on one connection: far more requests in
// flight than the leader's one worker thread. All are answered OK, every message once. With a
// worker blocked per request (the design before), the first receive holds the only worker
// until its wait times out (the follower's pull that would end it is queued behind it), each
// answer is UNAVAILABLE and the 48 take 48 x 4 s.
TEST_F(SyncLeaseTest, PipelinedReceivesAndAcksOnOneConnectionAreAllAnswered) {
  constexpr int kMessages = 96;
  constexpr int kReceives = 48;
  SendMessages(kMessages);
  // Declared before the connection: its destructor fails outstanding calls into them.
  Answers received;
  Answers acked;
  auto conn = client::Connection::Open(leader_->Options());
  ASSERT_TRUE(conn.ok()) << conn.status();

  received.Resize(kReceives);
  for (int i = 0; i < kReceives; ++i) {
    (*conn)->CallAsync(ReceiveRequest(2, i % 2 == 1), 30'000, received.Slot(i));
  }
  ASSERT_TRUE(received.AwaitAll(kReceives, std::chrono::seconds(30)));
  std::vector<std::string> handles;
  std::set<std::string> bodies;
  for (int i = 0; i < kReceives; ++i) {
    absl::StatusOr<proto::Response> r = received.Get(i);
    ASSERT_TRUE(StatusOf(r).ok()) << "receive " << i << ": " << StatusOf(r);
    for (const proto::ReceivedMessage& m : r->receive().messages()) {
      handles.push_back(m.receipt_handle());
      EXPECT_TRUE(bodies.insert(m.body()).second) << "delivered twice: " << m.body();
    }
  }
  EXPECT_EQ(bodies.size(), static_cast<size_t>(kMessages));

  acked.Resize(static_cast<int>(handles.size()));
  for (size_t i = 0; i < handles.size(); ++i) {
    (*conn)->CallAsync(AckRequest(handles[i]), 30'000, acked.Slot(static_cast<int>(i)));
  }
  ASSERT_TRUE(acked.AwaitAll(static_cast<int>(handles.size()), std::chrono::seconds(30)));
  for (size_t i = 0; i < handles.size(); ++i) {
    absl::StatusOr<proto::Response> r = acked.Get(static_cast<int>(i));
    ASSERT_TRUE(StatusOf(r).ok()) << "ack " << i << ": " << StatusOf(r);
    ASSERT_EQ(r->ack().results_size(), 1);
    EXPECT_EQ(r->ack().results(0).code(), 0)
        << "ack " << i << ": " << r->ack().results(0).message();
  }
  // Nothing is left to deliver: every ack stood.
  auto left = (*conn)->Call(ReceiveRequest(16), 10'000);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(left->receive().messages_size(), 0);
}

// The follower is killed: an ack and a receive on one connection wait for it and are answered
// UNAVAILABLE after replication_ack_timeout, while a stats request (a worker) and an ack of an
// unknown handle (the I/O thread, nothing to wait for) on another connection are answered at
// once. The ack stands on the leader (docs/replication.md): its retry finds the handle stale.
TEST_F(SyncLeaseTest, WithoutAFollowerLeaseRequestsFailAfterTheTimeoutAndOthersAreServed) {
  SendMessages(3);
  Answers waiting;  // before the connections: their destructors fail outstanding calls into it
  auto conn = client::Connection::Open(leader_->Options());
  ASSERT_TRUE(conn.ok()) << conn.status();
  auto first = (*conn)->Call(ReceiveRequest(1), 10'000);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->receive().messages_size(), 1);
  const std::string handle = first->receive().messages(0).receipt_handle();

  follower_->Kill();
  auto other = client::Connection::Open(leader_->Options());
  ASSERT_TRUE(other.ok()) << other.status();

  waiting.Resize(2);
  const Clock::time_point sent = Clock::now();
  (*conn)->CallAsync(AckRequest(handle), 30'000, waiting.Slot(0));
  (*conn)->CallAsync(ReceiveRequest(1), 30'000, waiting.Slot(1));

  // Meanwhile, on the other connection: answered long before the timeout.
  proto::Request stats;
  stats.mutable_stats();
  auto st = (*other)->Call(std::move(stats), 10'000);
  const auto stats_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent).count();
  ASSERT_TRUE(st.ok()) << st.status();
  auto unknown = (*other)->Call(AckRequest("no-such-handle"), 10'000);
  const auto unknown_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent).count();
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  ASSERT_EQ(unknown->ack().results_size(), 1);
  EXPECT_NE(unknown->ack().results(0).code(), 0);
  EXPECT_LT(stats_ms, kAckTimeoutMs / 2);
  EXPECT_LT(unknown_ms, kAckTimeoutMs / 2);

  ASSERT_TRUE(waiting.AwaitAll(2, std::chrono::milliseconds(kAckTimeoutMs + 10'000)));
  for (int i = 0; i < 2; ++i) {
    absl::Status s = StatusOf(waiting.Get(i));
    EXPECT_TRUE(absl::IsUnavailable(s)) << i << ": " << s;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(waiting.At(i) - sent).count();
    EXPECT_GE(ms, kAckTimeoutMs - 100) << i;  // the timeout, not an early failure
  }
  // The ack stood on the leader though it was not acknowledged: a retry finds the handle stale.
  auto retry = (*conn)->Call(AckRequest(handle), 10'000);
  ASSERT_TRUE(retry.ok()) << retry.status();
  ASSERT_EQ(retry->ack().results_size(), 1);
  EXPECT_NE(retry->ack().results(0).code(), 0);
}

// Acks carried by a receive that finds nothing and waits out its long poll on a worker
// (docs/protocol.md "Acks carried by a receive"): the answer still waits for a follower to hold
// the acks — with the follower there it is OK after the poll, without one it is UNAVAILABLE after
// replication_ack_timeout, not an OK right after the poll.
TEST_F(SyncLeaseTest, AcksCarriedByAReceiveThatLongPollsWaitForTheFollower) {
  SendMessages(2);
  auto conn = client::Connection::Open(leader_->Options());
  ASSERT_TRUE(conn.ok()) << conn.status();
  auto leased = (*conn)->Call(ReceiveRequest(2), 10'000);
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_EQ(leased->receive().messages_size(), 2);
  auto carrying = [&](const std::string& handle) {
    proto::Request req = ReceiveRequest(16, /*encoded=*/true);
    req.mutable_receive()->set_long_poll_ms(300);
    req.mutable_receive()->add_ack_receipt_handles(handle);
    return req;
  };

  Clock::time_point sent = Clock::now();
  auto with_follower = (*conn)->Call(carrying(leased->receive().messages(0).receipt_handle()),
                                     30'000);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent).count();
  ASSERT_TRUE(with_follower.ok()) << with_follower.status();
  EXPECT_EQ(with_follower->receive().messages_size(), 0);
  ASSERT_EQ(with_follower->receive().ack_results_size(), 1);
  EXPECT_EQ(with_follower->receive().ack_results(0).code(), 0);
  EXPECT_GE(ms, 250);  // the long poll ran
  EXPECT_LT(ms, kAckTimeoutMs);

  follower_->Kill();
  sent = Clock::now();
  const std::string second = leased->receive().messages(1).receipt_handle();
  auto without = (*conn)->Call(carrying(second), 30'000);
  ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent).count();
  EXPECT_TRUE(absl::IsUnavailable(StatusOf(without))) << StatusOf(without);
  EXPECT_GE(ms, kAckTimeoutMs - 100);
  // The ack stood on the leader: a retry finds the handle stale.
  auto retry = (*conn)->Call(AckRequest(second), 10'000);
  ASSERT_TRUE(retry.ok()) << retry.status();
  ASSERT_EQ(retry->ack().results_size(), 1);
  EXPECT_NE(retry->ack().results(0).code(), 0);
}

}  // namespace
}  // namespace tokimq
