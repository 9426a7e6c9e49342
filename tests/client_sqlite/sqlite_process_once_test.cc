// SqliteProcessOnce (client/sqlite_process_once.h) on a real SQLite file in a temp dir.
// The business table is a counter, not a status guard: it would double-apply without the
// processed-messages table, so these tests see the process-once mark itself at work.
#include "client/sqlite_process_once.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace tokimq::client {
namespace {

class SqliteProcessOnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tokimq-process-once.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/app.db";
    db_ = OpenConn();
    ASSERT_TRUE(db_->ExecScript("CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER);"
                                "CREATE TABLE orders(id INTEGER PRIMARY KEY, status TEXT);"
                                "CREATE TABLE audit(message_id TEXT);"
                                "INSERT INTO accounts VALUES(1, 0);"
                                "INSERT INTO orders VALUES(7, 'UNPAID');")
                    .ok());
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<SqliteConnection> OpenConn(int64_t busy_timeout_ms = 5'000,
                                             std::shared_ptr<std::mutex> writer_mutex = nullptr) {
    SqliteOptions o;
    o.busy_timeout_ms = busy_timeout_ms;
    o.writer_mutex = std::move(writer_mutex);
    auto c = SqliteConnection::Open(path_, o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  SqliteProcessOnce Once(SqliteConnection* db) {
    ProcessOnceOptions o;
    o.clock = &clock_;
    auto p = SqliteProcessOnce::Create(db, o);
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(*p);
  }
  // Adds 1 to account 1 and counts its calls: not idempotent on its own.
  BusinessUpdate Credit() {
    return [this](SqliteConnection& db) -> absl::StatusOr<int64_t> {
      ++calls_;
      return db.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = 1");
    };
  }
  int64_t Balance(SqliteConnection& db) {
    return db.QueryInt64("SELECT balance FROM accounts WHERE id = 1")->value();
  }

  ManualClock clock_{1'700'000'000'000};
  std::string dir_, path_;
  std::unique_ptr<SqliteConnection> db_;
  int calls_ = 0;
};

TEST_F(SqliteProcessOnceTest, ConnectionIsInWalMode) {
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db_->handle(), "PRAGMA journal_mode", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  EXPECT_EQ(db_->QueryInt64("PRAGMA synchronous")->value(), 2);  // FULL
}

TEST_F(SqliteProcessOnceTest, FirstDeliveryAppliesAndRecordsTheId) {
  SqliteProcessOnce once = Once(db_.get());
  auto r = once.Process("msg-1", Credit());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ProcessOutcome::kApplied);
  EXPECT_EQ(Balance(*db_), 1);
  EXPECT_TRUE(*once.IsProcessed("msg-1"));
  EXPECT_FALSE(*once.IsProcessed("msg-2"));
  EXPECT_EQ(db_->QueryInt64("SELECT processed_at_ms FROM processed_messages "
                            "WHERE message_id = 'msg-1'")
                ->value(),
            1'700'000'000'000);
}

TEST_F(SqliteProcessOnceTest, RedeliveryIsDuplicateAndDoesNotRunTheUpdate) {
  SqliteProcessOnce once = Once(db_.get());
  ASSERT_EQ(*once.Process("msg-1", Credit()), ProcessOutcome::kApplied);
  auto again = once.Process("msg-1", Credit());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, ProcessOutcome::kDuplicate);
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(Balance(*db_), 1);
  EXPECT_EQ(*once.Process("msg-2", Credit()), ProcessOutcome::kApplied);
  EXPECT_EQ(Balance(*db_), 2);
}

TEST_F(SqliteProcessOnceTest, ZeroRowsChangedAbortsEverythingOfThatMessage) {
  SqliteProcessOnce once = Once(db_.get());
  auto update = [](SqliteConnection& db) -> absl::StatusOr<int64_t> {
    auto side = db.Exec("INSERT INTO audit VALUES('m')");  // rolled back with the rest
    if (!side.ok()) return side.status();
    return db.Exec("UPDATE orders SET status = 'CANCELLED' WHERE id = 7 AND status = 'PAID'");
  };
  auto r = once.Process("msg-1", update);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("changed 0 rows"), std::string::npos);
  EXPECT_FALSE(*once.IsProcessed("msg-1"));
  EXPECT_EQ(db_->QueryInt64("SELECT COUNT(*) FROM audit")->value(), 0);
  EXPECT_FALSE(db_->in_transaction());
  // Not recorded, so a later delivery runs the update again (and here applies).
  auto ok = once.Process("msg-1", [](SqliteConnection& db) {
    return db.Exec("UPDATE orders SET status = 'CANCELLED' WHERE id = 7 AND status = 'UNPAID'");
  });
  EXPECT_EQ(*ok, ProcessOutcome::kApplied);
}

TEST_F(SqliteProcessOnceTest, TwoRowsChangedAborts) {
  ASSERT_TRUE(db_->ExecScript("INSERT INTO accounts VALUES(2, 0)").ok());
  SqliteProcessOnce once = Once(db_.get());
  auto r = once.Process("msg-1", [](SqliteConnection& db) {
    return db.Exec("UPDATE accounts SET balance = balance + 1");
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(db_->QueryInt64("SELECT SUM(balance) FROM accounts")->value(), 0);
}

TEST_F(SqliteProcessOnceTest, BusinessErrorAbortsAndIsReturned) {
  SqliteProcessOnce once = Once(db_.get());
  auto r = once.Process("msg-1", [](SqliteConnection& db) -> absl::StatusOr<int64_t> {
    (void)db.Exec("UPDATE accounts SET balance = 99 WHERE id = 1");
    return absl::DataLossError("card service said no");
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Balance(*db_), 0);
  EXPECT_FALSE(*once.IsProcessed("msg-1"));
}

TEST_F(SqliteProcessOnceTest, BatchAbortsOnlyTheFailingMessage) {
  SqliteProcessOnce once = Once(db_.get());
  auto zero = [](SqliteConnection& db) {
    return db.Exec("UPDATE accounts SET balance = balance + 100 WHERE id = 999");
  };
  auto r = once.ProcessBatch({{"a", Credit()}, {"b", zero}, {"c", Credit()}, {"a", Credit()}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ(*(*r)[0], ProcessOutcome::kApplied);
  EXPECT_EQ((*r)[1].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*(*r)[2], ProcessOutcome::kApplied);
  EXPECT_EQ(*(*r)[3], ProcessOutcome::kDuplicate);
  EXPECT_EQ(Balance(*db_), 2);
  EXPECT_TRUE(*once.IsProcessed("a"));
  EXPECT_FALSE(*once.IsProcessed("b"));
  EXPECT_TRUE(*once.IsProcessed("c"));
}

// The consumer commits, then is killed (kill -9) before it ACKs: the broker redelivers after the
// lease, and the restarted consumer must only report a duplicate.
TEST_F(SqliteProcessOnceTest, KillAfterCommitBeforeAckIsDuplicateAfterRestart) {
  db_.reset();  // no connection across fork()
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto conn = SqliteConnection::Open(path_);
    if (!conn.ok()) ::_exit(3);
    auto once = SqliteProcessOnce::Create(conn->get());
    if (!once.ok()) ::_exit(4);
    auto r = once->Process("msg-1", [](SqliteConnection& db) {
      return db.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = 1");
    });
    if (!r.ok() || *r != ProcessOutcome::kApplied) ::_exit(5);
    ::raise(SIGKILL);  // between the COMMIT and the ACK
    ::_exit(6);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  db_ = OpenConn();
  SqliteProcessOnce once = Once(db_.get());
  EXPECT_EQ(Balance(*db_), 1);  // the killed process's commit is there
  auto again = once.Process("msg-1", Credit());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, ProcessOutcome::kDuplicate);
  EXPECT_EQ(calls_, 0);
  EXPECT_EQ(Balance(*db_), 1);
}

// While one connection holds the write transaction, a second one with no busy timeout gets
// kUnavailable and commits nothing; after the first commits, it sees the id as processed.
TEST_F(SqliteProcessOnceTest, SecondConnectionIsBusyWhileTheFirstHoldsTheTransaction) {
  auto other = OpenConn(/*busy_timeout_ms=*/0);
  SqliteProcessOnce once = Once(db_.get());
  SqliteProcessOnce other_once = Once(other.get());
  absl::Status inner;
  auto r = once.Process("msg-1", [&](SqliteConnection& db) -> absl::StatusOr<int64_t> {
    inner = other_once.Process("msg-1", Credit()).status();
    return db.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = 1");
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ProcessOutcome::kApplied);
  EXPECT_EQ(inner.code(), absl::StatusCode::kUnavailable) << inner;
  EXPECT_FALSE(other->in_transaction());
  EXPECT_EQ(calls_, 0);
  EXPECT_EQ(*other_once.Process("msg-1", Credit()), ProcessOutcome::kDuplicate);
  EXPECT_EQ(Balance(*db_), 1);
}

// Two threads, one connection each, race over the same 300 ids: every id applies exactly once;
// the loser waits in the busy timeout instead of failing.
TEST_F(SqliteProcessOnceTest, TwoConnectionsRacingApplyEachIdOnce) {
  constexpr int kIds = 300;
  int applied[2] = {0, 0}, duplicate[2] = {0, 0}, errors[2] = {0, 0};
  auto run = [&](int t) {
    auto conn = OpenConn(/*busy_timeout_ms=*/30'000);
    SqliteProcessOnce once = Once(conn.get());
    for (int i = 0; i < kIds; ++i) {
      auto r = once.Process("msg-" + std::to_string(i), [](SqliteConnection& db) {
        return db.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = 1");
      });
      if (!r.ok()) {
        ++errors[t];
      } else if (*r == ProcessOutcome::kApplied) {
        ++applied[t];
      } else {
        ++duplicate[t];
      }
    }
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  EXPECT_EQ(errors[0] + errors[1], 0);
  EXPECT_EQ(applied[0] + applied[1], kIds);
  EXPECT_EQ(duplicate[0] + duplicate[1], kIds);
  EXPECT_EQ(Balance(*db_), kIds);
}

// With a shared writer mutex the two connections queue on it: even with no busy timeout at all
// neither ever meets SQLITE_BUSY.
TEST_F(SqliteProcessOnceTest, SharedWriterMutexQueuesWritersWithoutBusyErrors) {
  constexpr int kIds = 300;
  auto mutex = std::make_shared<std::mutex>();
  int applied[2] = {0, 0}, errors[2] = {0, 0};
  auto run = [&](int t) {
    auto conn = OpenConn(/*busy_timeout_ms=*/0, mutex);
    SqliteProcessOnce once = Once(conn.get());
    for (int i = 0; i < kIds; ++i) {
      auto r = once.Process("msg-" + std::to_string(i), [](SqliteConnection& db) {
        return db.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = 1");
      });
      if (!r.ok()) {
        ++errors[t];
      } else if (*r == ProcessOutcome::kApplied) {
        ++applied[t];
      }
    }
  };
  db_.reset();  // its reads would not block, but keep the file to the two writers
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  EXPECT_EQ(errors[0] + errors[1], 0);
  EXPECT_EQ(applied[0] + applied[1], kIds);
  db_ = OpenConn();
  EXPECT_EQ(Balance(*db_), kIds);
}

TEST_F(SqliteProcessOnceTest, PurgeDeletesIdsOlderThanTheCutoff) {
  SqliteProcessOnce once = Once(db_.get());
  ASSERT_EQ(*once.Process("old", Credit()), ProcessOutcome::kApplied);
  clock_.AdvanceMs(60'000);
  ASSERT_EQ(*once.Process("new", Credit()), ProcessOutcome::kApplied);
  auto n = once.Purge(clock_.NowMs() - 30'000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_FALSE(*once.IsProcessed("old"));
  EXPECT_TRUE(*once.IsProcessed("new"));
}

TEST_F(SqliteProcessOnceTest, BadTableNameIsRefused) {
  ProcessOnceOptions o;
  o.table = "x; DROP TABLE orders";
  EXPECT_EQ(SqliteProcessOnce::Create(db_.get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SqliteProcessOnceTest, RefusesToNestInAnOpenTransaction) {
  SqliteProcessOnce once = Once(db_.get());
  ASSERT_TRUE(db_->ExecScript("BEGIN").ok());
  EXPECT_EQ(once.Process("msg-1", Credit()).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(db_->ExecScript("ROLLBACK").ok());
}

}  // namespace
}  // namespace tokimq::client
