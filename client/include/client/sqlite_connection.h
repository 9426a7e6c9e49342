// SqliteConnection: one SQLite database connection set up for a consumer's local transactions
// (the process-once table of client/sqlite_process_once.h and the user's own business tables).
//
// Setup on Open: journal_mode=WAL (readers do not block the writer; a commit is one append to
// the -wal file), the busy timeout (another connection holding the write lock makes a write wait
// up to busy_timeout_ms, then fail with kUnavailable), synchronous=FULL by default (a COMMIT
// that returned OK survives a power loss; NORMAL: survives a crash of this process, kill -9
// included, but the last commits may be lost on power loss; SQLite's own definitions).
//
// Errors: SQLITE_BUSY / SQLITE_LOCKED -> kUnavailable (retry later), SQLITE_CONSTRAINT ->
// kFailedPrecondition, anything else -> kInternal; the message names the SQL and SQLite's text.
//
// Ownership: owns the sqlite3 handle and a cache of prepared statements (keyed by SQL text).
// Thread-safety: none. One thread at a time; give each worker thread its own connection (they
// share the database file, SQLite serialises writers). Never use a connection across fork().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tokimq::client {

// A bound parameter: ?1, ?2, ... in order.
using SqlValue = std::variant<int64_t, std::string>;

struct SqliteOptions {
  int64_t busy_timeout_ms = 5'000;
  // true: PRAGMA synchronous=FULL (fsync at every commit); false: NORMAL (WAL: fsync only at
  // checkpoints; a commit survives a process crash, not a power loss).
  bool synchronous_full = true;
  // Optional, shared by the connections of this process to one file: WriteTransaction holds it,
  // so those writers queue on it instead of polling in SQLite's busy handler, which sleeps
  // 1..100 ms between tries (measured: the order-timeout demo's 100k sends took 17 s without
  // it). Other processes still meet the busy timeout.
  std::shared_ptr<std::mutex> writer_mutex;
};

class SqliteConnection {
 public:
  // Opens (creating if missing) the database file at `path` and applies the setup above.
  // kInternal if the file cannot be opened or WAL mode cannot be set.
  static absl::StatusOr<std::unique_ptr<SqliteConnection>> Open(const std::string& path,
                                                                const SqliteOptions& options = {});
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // Runs one or more statements without parameters (schema setup, BEGIN/COMMIT).
  absl::Status ExecScript(const std::string& sql);
  // Runs one statement with `binds`; returns the number of rows it inserted, updated or deleted
  // (sqlite3_changes). A SELECT's rows are discarded.
  absl::StatusOr<int64_t> Exec(std::string_view sql, const std::vector<SqlValue>& binds = {});
  // First column of the first row as an integer; nullopt when there is no row.
  absl::StatusOr<std::optional<int64_t>> QueryInt64(std::string_view sql,
                                                    const std::vector<SqlValue>& binds = {});
  // Every row's first column as an integer (audits).
  absl::StatusOr<std::vector<int64_t>> QueryInt64Column(std::string_view sql,
                                                        const std::vector<SqlValue>& binds = {});

  // Runs `body` between BEGIN IMMEDIATE (the write lock is taken at once, so a busy database
  // waits in the busy handler here rather than failing at the first write of a read
  // transaction) and COMMIT; ROLLBACK when `body` or COMMIT fails, and `body`'s or COMMIT's error
  // is returned. Holds options.writer_mutex throughout when set. kFailedPrecondition when the
  // connection already is in a transaction.
  absl::Status WriteTransaction(const std::function<absl::Status()>& body);

  bool in_transaction() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }

 private:
  SqliteConnection(sqlite3* db, std::string path, std::shared_ptr<std::mutex> writer_mutex)
      : db_(db), path_(std::move(path)), writer_mutex_(std::move(writer_mutex)) {}
  absl::StatusOr<sqlite3_stmt*> Prepare(std::string_view sql, const std::vector<SqlValue>& binds);
  absl::Status Error(int rc, std::string_view sql) const;

  sqlite3* db_;
  std::string path_;
  std::shared_ptr<std::mutex> writer_mutex_;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace tokimq::client
