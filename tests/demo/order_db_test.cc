// OrderDb (examples/order_timeout/order_db.h): the guarded, process-once cancel and payment on
// SQLite, paid-or-cancelled exclusivity under concurrent connections, the end-of-run audit, the
// --resume queries; plus the example's message body codec and payment plan.
#include "order_timeout/order_db.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "order_timeout/workers.h"
#include "test_util.h"

namespace tokimq::order_timeout {
namespace {

using client::ProcessOutcome;

class OrderDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(OrderDb::CreateRun(path_, RunConfig{9, kOrders, 1000, 500'000, 7}, Options()).ok());
    db_ = Open();
  }
  static client::SqliteOptions Options() {
    client::SqliteOptions o;
    o.busy_timeout_ms = 30'000;
    o.synchronous_full = false;  // the tests do not cut power
    return o;
  }
  std::unique_ptr<OrderDb> Open() {
    auto db = OrderDb::Open(path_, Options(), clock_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(*db) : nullptr;
  }
  OrderStatus StatusOf(uint64_t id) { return db_->Status(id)->first; }

  static constexpr uint64_t kOrders = 2'000;
  testing::TempDir dir_;
  std::string path_ = dir_.Join("orders.db");
  ManualClock clock_;
  std::unique_ptr<OrderDb> db_;
};

TEST_F(OrderDbTest, CreateRunRefusesASecondRunAndOpenReadsTheConfig) {
  EXPECT_EQ(OrderDb::CreateRun(path_, RunConfig{}, Options()).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(db_->config().run_id, 9u);
  EXPECT_EQ(db_->config().orders, kOrders);
  EXPECT_EQ(db_->config().timeout_ms, 1000);
  EXPECT_EQ(db_->config().paid_ppm, 500'000u);
  EXPECT_EQ(db_->config().seed, 7u);
  EXPECT_EQ(OrderDb::Open(dir_.Join("none.db"), Options(), clock_).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(OrderDbTest, CreateOrdersInsertsOnlyNewIdsAndMarksSent) {
  auto first = db_->CreateOrders({1, 2, 3}, /*deadline_ms=*/5000, /*now_ms=*/4000);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, (std::vector<uint64_t>{1, 2, 3}));
  auto again = db_->CreateOrders({3, 4}, 9000, 8000, /*sent_ids=*/{1});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, (std::vector<uint64_t>{4}));
  EXPECT_EQ(db_->Status(3)->second, 5000);  // the first creation's deadline stays
  auto unsent = db_->Unpaid(/*unsent_only=*/true);
  ASSERT_TRUE(unsent.ok());
  EXPECT_EQ(unsent->size(), 3u);  // 2, 3, 4
  OrderCounts c = *db_->Counts();
  EXPECT_EQ(c.created, 4u);
  EXPECT_EQ(c.sent, 1u);
}

TEST_F(OrderDbTest, CancelBeforeTheDeadlineChangesNothing) {
  ASSERT_TRUE(db_->CreateOrders({1}, 5000, 4000).ok());
  auto early = db_->Cancel({{"m1", 1}}, /*now_ms=*/4999);
  ASSERT_TRUE(early.ok());
  EXPECT_EQ((*early)[0].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusOf(1), OrderStatus::kUnpaid);
  // Not recorded as processed: the same message, redelivered at the deadline, cancels.
  auto due = db_->Cancel({{"m1", 1}}, 5000);
  EXPECT_EQ(*(*due)[0], ProcessOutcome::kApplied);
  EXPECT_EQ(StatusOf(1), OrderStatus::kCancelled);
}

TEST_F(OrderDbTest, RedeliveredTimeoutIsADuplicateAndAppliesNothing) {
  ASSERT_TRUE(db_->CreateOrders({1}, 5000, 0).ok());
  EXPECT_EQ(*(*db_->Cancel({{"m1", 1}}, 6000))[0], ProcessOutcome::kApplied);
  EXPECT_EQ(*(*db_->Cancel({{"m1", 1}}, 7000))[0], ProcessOutcome::kDuplicate);
  // A second message for the same order (resent on --resume): the status guard refuses it.
  EXPECT_EQ((*db_->Cancel({{"m2", 1}}, 7000))[0].status().code(),
            absl::StatusCode::kFailedPrecondition);
  OrderAudit a = *db_->Audit();
  EXPECT_EQ(a.cancelled, 1u);
  EXPECT_EQ(a.duplicates_applied, 0u);
  EXPECT_EQ(db_->connection().QueryInt64("SELECT cancelled_ms FROM orders WHERE id = 1")->value(),
            6000);
}

TEST_F(OrderDbTest, PaidOrderIsNotCancelledAndExpiredOrderIsNotPaid) {
  ASSERT_TRUE(db_->CreateOrders({1, 2}, 5000, 0).ok());
  EXPECT_EQ(*(*db_->Pay({{"p1", 1}}, 100))[0], ProcessOutcome::kApplied);
  EXPECT_EQ((*db_->Cancel({{"m1", 1}}, 6000))[0].status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusOf(1), OrderStatus::kPaid);
  EXPECT_EQ((*db_->Pay({{"p2", 2}}, 5000))[0].status().code(),
            absl::StatusCode::kFailedPrecondition);  // at the deadline: too late to pay
  EXPECT_EQ(StatusOf(2), OrderStatus::kUnpaid);
  EXPECT_EQ(StatusOf(3), OrderStatus::kNone);
}

TEST_F(OrderDbTest, ConcurrentPayersAndCancellersOnTheirOwnConnectionsNeverBothWin) {
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < kOrders; ++id) ids.push_back(id);
  ASSERT_TRUE(db_->CreateOrders(ids, /*deadline_ms=*/1000, 0).ok());
  std::atomic<uint64_t> applied{0};
  auto worker = [&](bool pay, bool reverse) {
    std::unique_ptr<OrderDb> db = Open();
    for (uint64_t i = 0; i < kOrders; i += 50) {
      std::vector<OrderChange> batch;
      for (uint64_t j = i; j < i + 50; ++j) {
        const uint64_t id = reverse ? kOrders - 1 - j : j;
        batch.push_back({(pay ? "p" : "m") + std::to_string(id), id});
      }
      // Payments just before the deadline, cancels at it: both guards pass for an UNPAID order.
      auto r = pay ? db->Pay(batch, 999) : db->Cancel(batch, 1000);
      ASSERT_TRUE(r.ok()) << r.status();
      for (const auto& one : *r) {
        if (one.ok() && *one == ProcessOutcome::kApplied) applied.fetch_add(1);
      }
    }
  };
  std::thread a(worker, true, false), b(worker, false, true), c(worker, true, true),
      d(worker, false, false);
  a.join();
  b.join();
  c.join();
  d.join();
  OrderAudit audit = *db_->Audit();
  EXPECT_EQ(applied.load(), kOrders);
  EXPECT_EQ(audit.paid + audit.cancelled, kOrders);
  EXPECT_EQ(audit.both, 0u);
  EXPECT_EQ(audit.missed, 0u);
  EXPECT_EQ(audit.duplicates_applied, 0u);
}

TEST_F(OrderDbTest, AuditCountsMissedEarlyAndTwiceAppliedChanges) {
  ASSERT_TRUE(db_->CreateOrders({1, 2, 3}, 5000, 0).ok());
  ASSERT_EQ(*(*db_->Cancel({{"m1", 1}}, 5000))[0], ProcessOutcome::kApplied);
  // What a broken consumer without the process-once table would leave behind:
  client::SqliteConnection& c = db_->connection();
  ASSERT_TRUE(c.ExecScript("INSERT INTO order_events VALUES(1, 'CANCELLED', 'm1', 5001);"
                           "UPDATE orders SET status = 'CANCELLED', cancelled_ms = 10"
                           " WHERE id = 2")
                  .ok());
  OrderAudit a = *db_->Audit();
  EXPECT_EQ(a.created, 3u);
  EXPECT_EQ(a.cancelled, 2u);
  EXPECT_EQ(a.cancelled_early, 1u);         // order 2
  EXPECT_EQ(a.missed, 1u + (kOrders - 3));  // order 3 is UNPAID, the rest never created
  EXPECT_EQ(a.duplicates_applied, 2u);      // message m1 twice, order 1 twice
  EXPECT_EQ(a.processed_ids, 1u);
}

TEST(TimeoutBodyTest, RoundTripsAndRejectsGarbage) {
  std::string body = TimeoutBody(0xabcdef0123456789ull, 424242);
  EXPECT_EQ(body, "abcdef0123456789:424242");
  uint64_t run = 0, id = 0;
  ASSERT_TRUE(ParseTimeoutBody(body, &run, &id));
  EXPECT_EQ(run, 0xabcdef0123456789ull);
  EXPECT_EQ(id, 424242u);
  EXPECT_FALSE(ParseTimeoutBody("abcdef0123456789-1", &run, &id));
  EXPECT_FALSE(ParseTimeoutBody("abcdef012345678X:1", &run, &id));
  EXPECT_FALSE(ParseTimeoutBody("abcdef0123456789:1x", &run, &id));
  EXPECT_FALSE(ParseTimeoutBody("abcdef0123456789:99999999999999999999999", &run, &id));
  EXPECT_FALSE(ParseTimeoutBody("", &run, &id));
}

TEST(PaymentPlanTest, PaysTheConfiguredShareAtLeastAFifthOfTheTimeoutEarly) {
  RunConfig config{1, 100'000, 10'000, 700'000, 12345};
  uint64_t pays = 0;
  for (uint64_t id = 0; id < config.orders; ++id) {
    if (!PaymentSimulator::WillPay(config, id)) continue;
    ++pays;
    int64_t at = PaymentSimulator::PayAtMs(config, id, /*deadline_ms=*/50'000);
    ASSERT_GE(at, 50'000 - 9'000);
    ASSERT_LE(at, 50'000 - 2'000);
  }
  EXPECT_GT(pays, 69'000u);
  EXPECT_LT(pays, 71'000u);
  // Deterministic: a resumed run pays the same orders.
  EXPECT_EQ(PaymentSimulator::WillPay(config, 77), PaymentSimulator::WillPay(config, 77));
  EXPECT_EQ(PaymentSimulator::PaymentId(config, 5), "pay-0000000000000001:5");
}

}  // namespace
}  // namespace tokimq::order_timeout
