// examples/accounts: the log model (orderings of the seed, replay, body codec) and the SQLite
// projection (exactly-once by message id, rollback of an injected failure, violations).
#include <gtest/gtest.h>

#include "accounts/account_log.h"
#include "accounts/projection.h"
#include "test_util.h"

namespace tokimq::accounts {
namespace {

using ordering::EventAtomicOrdering;

TEST(AccountLogTest, OrderingsFollowTheSeed) {
  EXPECT_EQ(OrderingOf({"a", 0, EventType::kOpened}), EventAtomicOrdering::Acquire);
  EXPECT_EQ(OrderingOf({"a", 0, EventType::kDeposited, 5}), EventAtomicOrdering::Relaxed);
  EXPECT_EQ(OrderingOf({"a", 0, EventType::kWithdrawn, 5}), EventAtomicOrdering::Relaxed);
  EXPECT_EQ(OrderingOf({"a", 0, EventType::kClosed}), EventAtomicOrdering::Release);
  EXPECT_EQ(OrderingOf({"a", 0, EventType::kStatus, 0, "active"}), EventAtomicOrdering::Relaxed);
  EXPECT_EQ(OrderingOf({"a", 0, EventType::kStatus, 0, "frozen"}), EventAtomicOrdering::AcqRel);
  EXPECT_EQ(OrderingOf({"a", 0, EventType::kStatus, 0, "closed"}), EventAtomicOrdering::Release);
}

TEST(AccountLogTest, LogIsDeterministicAndEveryAccountStartsOpened) {
  auto a = GenerateLog(50, 20, 9);
  auto b = GenerateLog(50, 20, 9);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(EncodeBody(a[i]), EncodeBody(b[i]));
  std::map<std::string, int> next;
  for (const auto& e : a) {
    if (next[e.account] == 0) {
      EXPECT_EQ(e.type, EventType::kOpened) << e.account;
    }
    EXPECT_EQ(e.seq, next[e.account]++) << e.account;
  }
  EXPECT_EQ(next.size(), 50u);
}

TEST(AccountLogTest, BodyRoundTripsAndRejectsGarbage) {
  AccountEvent e{"acct-00001", 7, EventType::kStatus, 0, "frozen"};
  auto back = DecodeBody("acct-00001", EncodeBody(e));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(EncodeBody(*back), "5|7|0|frozen");
  EXPECT_FALSE(DecodeBody("a", "9|1|0|").ok());
  EXPECT_FALSE(DecodeBody("a", "2|x|0|").ok());
  EXPECT_FALSE(DecodeBody("a", "2|1|0").ok());
}

TEST(AccountLogTest, ReplayAppliesInLogOrder) {
  std::vector<AccountEvent> log = {{"a", 0, EventType::kOpened},
                                   {"a", 1, EventType::kDeposited, 100},
                                   {"a", 2, EventType::kWithdrawn, 30},
                                   {"a", 3, EventType::kStatus, 0, "frozen"},
                                   {"a", 4, EventType::kClosed}};
  auto s = SequentialReplay(log);
  EXPECT_EQ(s["a"], (AccountState{70, "closed", false}));
}

class ProjectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = Projection::Open(dir_.Join("p.db"));
    ASSERT_TRUE(p.ok()) << p.status();
    proj_ = std::move(*p);
  }
  absl::Status Apply(const Reduced& r, bool fail = false) { return proj_->Apply({&r}, fail); }
  testing::TempDir dir_;
  std::unique_ptr<Projection> proj_;
};

TEST_F(ProjectionTest, AppliesEachMessageOnceEvenInsideAReducedEvent) {
  ASSERT_TRUE(Apply({"a", EventType::kOpened, "", {{"m0", 0, 0}}}).ok());
  ASSERT_TRUE(Apply({"a", EventType::kDeposited, "", {{"m1", 1, 100}, {"m2", 2, 20}}}).ok());
  // Redelivered m2 summed with a new m3: only m3 counts.
  ASSERT_TRUE(Apply({"a", EventType::kDeposited, "", {{"m2", 2, 20}, {"m3", 3, 5}}}).ok());
  auto acc = proj_->Accounts();
  ASSERT_TRUE(acc.ok());
  EXPECT_EQ(acc->at("a"), (AccountState{125, "active", true}));
  auto c = proj_->Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->processed, 4);
  EXPECT_EQ(c->duplicates, 1);
  EXPECT_EQ(c->transactions, 3);
}

TEST_F(ProjectionTest, InjectedFailureRollsBackEverything) {
  ASSERT_TRUE(Apply({"a", EventType::kOpened, "", {{"m0", 0, 0}}}).ok());
  EXPECT_EQ(Apply({"a", EventType::kDeposited, "", {{"m1", 1, 100}}}, true).code(),
            absl::StatusCode::kUnavailable);
  auto c = proj_->Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->processed, 1);
  EXPECT_EQ(proj_->Accounts()->at("a").balance, 0);
  ASSERT_TRUE(Apply({"a", EventType::kDeposited, "", {{"m1", 1, 100}}}).ok());
  EXPECT_EQ(proj_->Accounts()->at("a").balance, 100);
}

TEST_F(ProjectionTest, EventOutsideOpenedAndClosedIsAViolation) {
  ASSERT_TRUE(Apply({"a", EventType::kDeposited, "", {{"m0", 0, 5}}}).ok());
  ASSERT_TRUE(Apply({"a", EventType::kOpened, "", {{"m1", 1, 0}}}).ok());
  ASSERT_TRUE(Apply({"a", EventType::kClosed, "", {{"m2", 2, 0}}}).ok());
  ASSERT_TRUE(Apply({"a", EventType::kStatus, "frozen", {{"m3", 3, 0}}}).ok());
  auto v = proj_->Violations(10);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->size(), 2u);
  EXPECT_EQ(proj_->Counts()->violations, 2);
}

}  // namespace
}  // namespace tokimq::accounts
