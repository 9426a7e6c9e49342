// OrderBook: the paid-or-cancelled exclusivity (also under concurrent payers and cancellers),
// deadlines, the sequence a caller must sync before acting, recovery by replay; plus the
// example's message body codec and payment plan.
#include "order_timeout/order_book.h"

#include <gtest/gtest.h>

#include <thread>

#include "order_timeout/workers.h"
#include "test_util.h"

namespace tokimq::order_timeout {
namespace {

class OrderBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = OrderLog::Create(FileSystem::Default(), dir_.Join("orders.log"),
                                RunConfig{9, kOrders, 1000, 500'000, 7});
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
    book_ = std::make_unique<OrderBook>(kOrders, log_.get());
  }

  static constexpr uint64_t kOrders = 20'000;
  testing::TempDir dir_;
  std::unique_ptr<OrderLog> log_;
  std::unique_ptr<OrderBook> book_;
};

TEST_F(OrderBookTest, CancelBeforeTheDeadlineIsNotDueAndChangesNothing) {
  book_->Create(1, /*deadline_ms=*/5000, /*now_ms=*/4000);
  uint64_t seq = 0;
  EXPECT_EQ(book_->CancelIfDue(1, 4999, &seq), CancelResult::kNotDue);
  EXPECT_EQ(book_->state(1), OrderState::kCreated);
  EXPECT_EQ(book_->CancelIfDue(1, 5000, &seq), CancelResult::kCancelled);
  EXPECT_EQ(book_->state(1), OrderState::kCancelled);
  EXPECT_EQ(seq, 2u);  // CREATED was 1
}

TEST_F(OrderBookTest, PaidOrderIsNotCancelledAndReportsThePaymentRecordToSync) {
  uint64_t created = book_->Create(1, 5000, 0);
  uint64_t paid_seq = 0;
  EXPECT_EQ(book_->Pay(1, 100, &paid_seq), PayResult::kPaid);
  EXPECT_GT(paid_seq, created);
  uint64_t seq = 0;
  EXPECT_EQ(book_->CancelIfDue(1, 6000, &seq), CancelResult::kPaid);
  EXPECT_EQ(seq, paid_seq);
  EXPECT_EQ(book_->Pay(1, 200, &seq), PayResult::kAlreadyPaid);
}

TEST_F(OrderBookTest, PaymentAfterCancellationIsRefused) {
  book_->Create(2, 5000, 0);
  uint64_t seq = 0;
  ASSERT_EQ(book_->CancelIfDue(2, 5000, &seq), CancelResult::kCancelled);
  EXPECT_EQ(book_->Pay(2, 5001, &seq), PayResult::kCancelled);
  EXPECT_EQ(book_->CancelIfDue(2, 5002, &seq), CancelResult::kAlreadyCancelled);
  BookCounts c = book_->counts();
  EXPECT_EQ(c.paid, 0u);
  EXPECT_EQ(c.cancelled, 1u);
}

TEST_F(OrderBookTest, UnknownOrdersAreReportedNotCreated) {
  uint64_t seq = 0;
  EXPECT_EQ(book_->Pay(3, 0, &seq), PayResult::kUnknown);
  EXPECT_EQ(book_->CancelIfDue(3, 0, &seq), CancelResult::kUnknown);
  EXPECT_EQ(book_->CancelIfDue(kOrders, 0, &seq), CancelResult::kUnknown);
  EXPECT_EQ(book_->Create(kOrders, 0, 0), 0u);
}

TEST_F(OrderBookTest, ConcurrentPayersAndCancellersNeverBothWin) {
  for (uint64_t id = 0; id < kOrders; ++id) book_->Create(id, 0, 0);
  std::atomic<uint64_t> paid{0}, cancelled{0};
  auto payer = [&](bool reverse) {
    for (uint64_t i = 0; i < kOrders; ++i) {
      uint64_t id = reverse ? kOrders - 1 - i : i, seq = 0;
      if (book_->Pay(id, 1, &seq) == PayResult::kPaid) paid.fetch_add(1);
    }
  };
  auto canceller = [&](bool reverse) {
    for (uint64_t i = 0; i < kOrders; ++i) {
      uint64_t id = reverse ? kOrders - 1 - i : i, seq = 0;
      if (book_->CancelIfDue(id, 1, &seq) == CancelResult::kCancelled) cancelled.fetch_add(1);
    }
  };
  std::thread a(payer, false), b(canceller, true), c(payer, true), d(canceller, false);
  a.join();
  b.join();
  c.join();
  d.join();
  EXPECT_EQ(paid.load() + cancelled.load(), kOrders);
  EXPECT_GT(paid.load(), 0u);
  EXPECT_GT(cancelled.load(), 0u);
  ASSERT_TRUE(log_->SyncAll().ok());

  // The durable log agrees: each order has exactly one final record.
  std::vector<int> finals(kOrders, 0);
  auto config = OrderLog::Scan(FileSystem::Default(), dir_.Join("orders.log"),
                               [&](const OrderRecord& r) {
    if (r.event == OrderEvent::kPaid || r.event == OrderEvent::kCancelled) ++finals[r.order_id];
  });
  ASSERT_TRUE(config.ok());
  for (uint64_t id = 0; id < kOrders; ++id) ASSERT_EQ(finals[id], 1) << "order " << id;
}

TEST_F(OrderBookTest, ReplayRestoresStatesDeadlinesAndSentFlags) {
  book_->Create(1, 5000, 0);
  book_->Create(2, 6000, 0);
  book_->Create(3, 7000, 0);
  book_->MarkSent(1, 10);
  uint64_t seq = 0;
  book_->Pay(1, 20, &seq);
  book_->CancelIfDue(2, 6000, &seq);
  ASSERT_TRUE(log_->SyncAll().ok());
  log_.reset();

  auto config = OrderLog::Scan(FileSystem::Default(), dir_.Join("orders.log"), nullptr);
  ASSERT_TRUE(config.ok());
  OrderBook replayed(config->orders, nullptr);
  auto log = OrderLog::Open(FileSystem::Default(), dir_.Join("orders.log"),
                            [&](const OrderRecord& r) { replayed.Replay(r); });
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(replayed.state(1), OrderState::kPaid);
  EXPECT_EQ(replayed.state(2), OrderState::kCancelled);
  EXPECT_EQ(replayed.state(3), OrderState::kCreated);
  EXPECT_EQ(replayed.deadline(3), 7000);
  EXPECT_TRUE(replayed.sent(1));
  EXPECT_FALSE(replayed.sent(3));
  BookCounts c = replayed.counts();
  EXPECT_EQ(c.created, 3u);
  EXPECT_EQ(c.sent, 1u);
  EXPECT_EQ(c.paid, 1u);
  EXPECT_EQ(c.cancelled, 1u);
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
}

}  // namespace
}  // namespace tokimq::order_timeout
