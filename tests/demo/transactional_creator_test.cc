// TransactionalCreator's checker (examples/order_timeout/transactional_creator.h): the broker's
// check-back is answered from SQLite, so an order exists iff its timeout message is committed.
#include "order_timeout/transactional_creator.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace tokimq::order_timeout {
namespace {

using client::TransactionResolution;

class TransactionalCheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.db_path = dir_.Join("orders.db");
    options_.sqlite.synchronous_full = false;
    ASSERT_TRUE(OrderDb::CreateRun(options_.db_path, config_, options_.sqlite).ok());
    auto db = OrderDb::Open(options_.db_path, options_.sqlite, clock_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }
  client::TransactionCheck CheckOf(uint64_t run_id, uint64_t id) {
    client::TransactionCheck c;
    c.topic = options_.topic;
    c.message_id = "half-" + std::to_string(id);
    c.transaction_id = "tx-" + std::to_string(id);
    c.body = TimeoutBody(run_id, id);
    return c;
  }

  testing::TempDir dir_;
  ManualClock clock_;
  JobOptions options_;
  RunConfig config_{0x1234, 100, 5000, 500'000, 7};
  std::unique_ptr<OrderDb> db_;
  Metrics metrics_;
};

TEST_F(TransactionalCheckerTest, CommitsWhenTheOrderRowExistsAndRollsBackWhenNot) {
  ASSERT_TRUE(db_->CreateOrders({3}, 10'000, 5'000).ok());  // the local transaction committed
  TransactionalCreator creator(options_, config_, nullptr, clock_, &metrics_);
  EXPECT_EQ(creator.Check(CheckOf(0x1234, 3)), TransactionResolution::kCommit);
  EXPECT_EQ(creator.Check(CheckOf(0x1234, 4)), TransactionResolution::kRollback);
  EXPECT_EQ(metrics_.checks_commit.load(), 1u);
  EXPECT_EQ(metrics_.checks_rollback.load(), 1u);
  // The answer follows the database, not a memory of this process: the row appears later.
  ASSERT_TRUE(db_->CreateOrders({4}, 10'000, 5'000).ok());
  EXPECT_EQ(creator.Check(CheckOf(0x1234, 4)), TransactionResolution::kCommit);
}

TEST_F(TransactionalCheckerTest, HalfOfAnEarlierAttemptAtTheOrderIsRolledBack) {
  // The order was created again (--resume after a kill) with its own timeout message: a half
  // the killed attempt left, with the old deadline, must not commit a second, early timeout.
  ASSERT_TRUE(db_->CreateOrders({3}, 10'000, 5'000).ok());
  auto row = db_->Status(3);
  ASSERT_TRUE(row.ok()) << row.status();
  const int64_t deadline = row->second;
  TransactionalCreator creator(options_, config_, nullptr, clock_, &metrics_);
  client::TransactionCheck current = CheckOf(0x1234, 3);
  current.properties[kDeadlineProperty] = std::to_string(deadline);
  EXPECT_EQ(creator.Check(current), TransactionResolution::kCommit);
  client::TransactionCheck stale = CheckOf(0x1234, 3);
  stale.properties[kDeadlineProperty] = std::to_string(deadline - 3'000);
  EXPECT_EQ(creator.Check(stale), TransactionResolution::kRollback);
  EXPECT_EQ(metrics_.checks_commit.load(), 1u);
  EXPECT_EQ(metrics_.checks_rollback.load(), 1u);
}

TEST_F(TransactionalCheckerTest, AnotherRunsOrGarbledMessageIsUnknown) {
  TransactionalCreator creator(options_, config_, nullptr, clock_, &metrics_);
  EXPECT_EQ(creator.Check(CheckOf(0x9999, 3)), TransactionResolution::kUnknown);
  client::TransactionCheck garbled = CheckOf(0x1234, 3);
  garbled.body = "not a timeout";
  EXPECT_EQ(creator.Check(garbled), TransactionResolution::kUnknown);
  EXPECT_EQ(metrics_.checks_unknown.load(), 2u);
  EXPECT_EQ(metrics_.checks_rollback.load(), 0u);
}

}  // namespace
}  // namespace tokimq::order_timeout
