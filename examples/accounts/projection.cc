#include "accounts/projection.h"

#include <sqlite3.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace tokimq::accounts {
namespace {

constexpr char kSchema[] = R"sql(
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
CREATE TABLE IF NOT EXISTS accounts(id TEXT PRIMARY KEY, balance INTEGER NOT NULL,
                                    status TEXT NOT NULL, open INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS processed(msg_id TEXT PRIMARY KEY, account TEXT NOT NULL,
                                     seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS violations(account TEXT NOT NULL, seq INTEGER NOT NULL,
                                      what TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
)sql";

// A prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return s_; }
  void Text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Int(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  int Step() { return sqlite3_step(s_); }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

absl::Status Error(sqlite3* db, const char* what) {
  return absl::InternalError(absl::StrCat("sqlite ", what, ": ", sqlite3_errmsg(db)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Projection>> Projection::Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    absl::Status s = Error(db, "open");
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<Projection> p(new Projection(db));
  sqlite3_busy_timeout(db, 10'000);
  if (absl::Status s = p->Exec(kSchema); !s.ok()) return s;
  return p;
}

Projection::~Projection() { sqlite3_close(db_); }

absl::Status Projection::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

absl::Status Projection::ApplyLocked(const Reduced& e, int64_t* duplicates) {
  // Parts not yet processed, and their sum.
  int64_t sum = 0;
  int fresh = 0;
  int first_seq = -1;
  for (const Part& part : e.parts) {
    Stmt ins(db_, "INSERT OR IGNORE INTO processed(msg_id, account, seq) VALUES(?, ?, ?)");
    if (!ins.ok()) return Error(db_, "prepare");
    ins.Text(1, part.msg_id);
    ins.Text(2, e.account);
    ins.Int(3, part.seq);
    if (ins.Step() != SQLITE_DONE) return Error(db_, "insert processed");
    if (sqlite3_changes(db_) == 0) {
      ++*duplicates;  // applied by an earlier delivery
      continue;
    }
    ++fresh;
    sum += part.amount;
    if (first_seq < 0) first_seq = part.seq;
  }
  if (fresh == 0) return absl::OkStatus();

  AccountState s;
  {
    Stmt get(db_, "SELECT balance, status, open FROM accounts WHERE id = ?");
    if (!get.ok()) return Error(db_, "prepare");
    get.Text(1, e.account);
    if (get.Step() == SQLITE_ROW) {
      s.balance = sqlite3_column_int64(get.get(), 0);
      s.status = reinterpret_cast<const char*>(sqlite3_column_text(get.get(), 1));
      s.open = sqlite3_column_int(get.get(), 2) != 0;
    }
  }
  std::string violation;
  const bool needs_open = e.type != EventType::kOpened;
  if (needs_open && !s.open) violation = "applied while the account was not open";
  if (!needs_open && s.open) violation = "opened while open";
  switch (e.type) {
    case EventType::kOpened:
      s.open = true;
      s.status = "active";
      break;
    case EventType::kDeposited:
      s.balance += sum;
      break;
    case EventType::kWithdrawn:
      s.balance -= sum;
      break;
    case EventType::kStatus:
      s.status = e.status;
      break;
    case EventType::kClosed:
      s.open = false;
      s.status = "closed";
      break;
  }
  if (!violation.empty()) {
    Stmt v(db_, "INSERT INTO violations(account, seq, what) VALUES(?, ?, ?)");
    v.Text(1, e.account);
    v.Int(2, first_seq);
    v.Text(3, violation);
    if (v.Step() != SQLITE_DONE) return Error(db_, "insert violation");
  }
  Stmt put(db_, "INSERT OR REPLACE INTO accounts(id, balance, status, open) VALUES(?, ?, ?, ?)");
  put.Text(1, e.account);
  put.Int(2, s.balance);
  put.Text(3, s.status);
  put.Int(4, s.open ? 1 : 0);
  if (put.Step() != SQLITE_DONE) return Error(db_, "update account");
  return absl::OkStatus();
}

absl::Status Projection::Apply(const std::vector<const Reduced*>& events, bool fail) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  int64_t duplicates = 0;
  absl::Status s;
  for (const Reduced* e : events) {
    s = ApplyLocked(*e, &duplicates);
    if (!s.ok()) break;
  }
  if (s.ok() && fail) s = absl::UnavailableError("injected handler failure");
  if (s.ok()) {
    Stmt m(db_,
           "INSERT INTO meta(name, value) VALUES('transactions', 1), ('duplicates', ?) "
           "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value");
    m.Int(1, duplicates);
    if (m.Step() != SQLITE_DONE) s = Error(db_, "meta");
  }
  if (!s.ok()) {
    Exec("ROLLBACK").IgnoreError();
    return s;
  }
  return Exec("COMMIT");
}

absl::StatusOr<std::map<std::string, AccountState>> Projection::Accounts() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, AccountState> out;
  Stmt q(db_, "SELECT id, balance, status, open FROM accounts");
  if (!q.ok()) return Error(db_, "prepare");
  while (q.Step() == SQLITE_ROW) {
    AccountState& s = out[reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0))];
    s.balance = sqlite3_column_int64(q.get(), 1);
    s.status = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 2));
    s.open = sqlite3_column_int(q.get(), 3) != 0;
  }
  return out;
}

absl::StatusOr<ProjectionCounts> Projection::Counts() {
  std::lock_guard<std::mutex> lock(mu_);
  ProjectionCounts c;
  auto one = [&](const char* sql, int64_t* out) {
    Stmt q(db_, sql);
    if (q.ok() && q.Step() == SQLITE_ROW) *out = sqlite3_column_int64(q.get(), 0);
  };
  one("SELECT COUNT(*) FROM processed", &c.processed);
  one("SELECT COUNT(*) FROM violations", &c.violations);
  one("SELECT COALESCE(SUM(value), 0) FROM meta WHERE name = 'transactions'", &c.transactions);
  one("SELECT COALESCE(SUM(value), 0) FROM meta WHERE name = 'duplicates'", &c.duplicates);
  return c;
}

absl::StatusOr<std::vector<std::string>> Projection::Violations(int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  Stmt q(db_, "SELECT account, seq, what FROM violations LIMIT ?");
  if (!q.ok()) return Error(db_, "prepare");
  q.Int(1, limit);
  while (q.Step() == SQLITE_ROW) {
    out.push_back(absl::StrCat(reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0)), "#",
                               sqlite3_column_int64(q.get(), 1), ": ",
                               reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 2))));
  }
  return out;
}

}  // namespace tokimq::accounts
