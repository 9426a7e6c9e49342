#include "client/sqlite_connection.h"

#include <sqlite3.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace tokimq::client {
namespace {

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {  // primary result code
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// Steps `stmt` to the end, discarding rows.
int StepAll(sqlite3_stmt* stmt) {
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
  }
  return rc;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(
    const std::string& path, const SqliteOptions& options) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::InternalError(absl::StrCat("sqlite: cannot open ", path, ": ", msg));
  }
  std::unique_ptr<SqliteConnection> conn(new SqliteConnection(db, path, options.writer_mutex));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, static_cast<int>(options.busy_timeout_ms));
  auto mode = [&]() -> absl::StatusOr<std::string> {
    sqlite3_stmt* stmt = nullptr;
    int prc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &stmt, nullptr);
    if (prc != SQLITE_OK) return conn->Error(prc, "PRAGMA journal_mode=WAL");
    std::string m;
    prc = sqlite3_step(stmt);
    if (prc == SQLITE_ROW) m = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    if (prc != SQLITE_ROW) return conn->Error(prc, "PRAGMA journal_mode=WAL");
    return m;
  }();
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return absl::InternalError(
        absl::StrCat("sqlite: ", path, ": journal_mode is ", *mode, ", WAL refused"));
  }
  absl::Status s = conn->ExecScript(options.synchronous_full ? "PRAGMA synchronous=FULL"
                                                             : "PRAGMA synchronous=NORMAL");
  if (!s.ok()) return s;
  return conn;
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

absl::Status SqliteConnection::Error(int rc, std::string_view sql) const {
  return absl::Status(CodeFor(rc), absl::StrCat("sqlite: ", sqlite3_errmsg(db_), " (",
                                                sqlite3_errstr(rc), ") in: ", std::string(sql)));
}

absl::Status SqliteConnection::ExecScript(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return absl::Status(CodeFor(rc), absl::StrCat("sqlite: ", msg, " in: ", sql));
}

absl::StatusOr<sqlite3_stmt*> SqliteConnection::Prepare(std::string_view sql,
                                                        const std::vector<SqlValue>& binds) {
  auto it = statements_.find(std::string(sql));
  sqlite3_stmt* stmt = nullptr;
  if (it != statements_.end()) {
    stmt = it->second;
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
  } else {
    int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, sql);
    statements_.emplace(std::string(sql), stmt);
  }
  for (size_t i = 0; i < binds.size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    int rc;
    if (const int64_t* v = std::get_if<int64_t>(&binds[i])) {
      rc = sqlite3_bind_int64(stmt, index, *v);
    } else {
      const std::string& text = std::get<std::string>(binds[i]);
      rc = sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()),
                             SQLITE_TRANSIENT);
    }
    if (rc != SQLITE_OK) return Error(rc, sql);
  }
  return stmt;
}

absl::StatusOr<int64_t> SqliteConnection::Exec(std::string_view sql,
                                               const std::vector<SqlValue>& binds) {
  auto stmt = Prepare(sql, binds);
  if (!stmt.ok()) return stmt.status();
  int rc = StepAll(*stmt);
  sqlite3_reset(*stmt);
  if (rc != SQLITE_DONE) return Error(rc, sql);
  return static_cast<int64_t>(sqlite3_changes64(db_));
}

absl::StatusOr<std::optional<int64_t>> SqliteConnection::QueryInt64(
    std::string_view sql, const std::vector<SqlValue>& binds) {
  auto stmt = Prepare(sql, binds);
  if (!stmt.ok()) return stmt.status();
  int rc = sqlite3_step(*stmt);
  std::optional<int64_t> value;
  if (rc == SQLITE_ROW) {
    value = sqlite3_column_int64(*stmt, 0);
    rc = SQLITE_DONE;
  }
  sqlite3_reset(*stmt);
  if (rc != SQLITE_DONE) return Error(rc, sql);
  return value;
}

absl::StatusOr<std::vector<int64_t>> SqliteConnection::QueryInt64Column(
    std::string_view sql, const std::vector<SqlValue>& binds) {
  auto stmt = Prepare(sql, binds);
  if (!stmt.ok()) return stmt.status();
  std::vector<int64_t> out;
  int rc;
  while ((rc = sqlite3_step(*stmt)) == SQLITE_ROW) out.push_back(sqlite3_column_int64(*stmt, 0));
  sqlite3_reset(*stmt);
  if (rc != SQLITE_DONE) return Error(rc, sql);
  return out;
}

absl::Status SqliteConnection::WriteTransaction(const std::function<absl::Status()>& body) {
  if (in_transaction()) {
    return absl::FailedPreconditionError("sqlite: already in a transaction on " + path_);
  }
  std::unique_lock<std::mutex> lock;
  if (writer_mutex_ != nullptr) lock = std::unique_lock<std::mutex>(*writer_mutex_);
  absl::Status s = ExecScript("BEGIN IMMEDIATE");
  if (!s.ok()) return s;
  s = body();
  if (s.ok()) s = ExecScript("COMMIT");
  if (!s.ok() && in_transaction()) (void)ExecScript("ROLLBACK");
  return s;
}

bool SqliteConnection::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

}  // namespace tokimq::client
