// Projection: the accounts' balances and statuses in SQLite, updated in the same transaction
// that records the processed message ids, so a redelivered message (a lease that ended before
// its ACK, a consumer killed between commit and ACK) is recognised and never applied twice.
//
// Tables (schema in projection.cc): accounts(id, balance, status, open), processed(msg_id,
// account, seq), violations(account, seq, what) for an event applied to an account that was
// not open (or an Opened to an open one), meta(name, value) counters.
//
// Durability: WAL journal, synchronous=NORMAL: a committed transaction survives a process
// crash (kill -9); a power loss may undo the last ones, which the broker then redelivers.
// Thread-safety: Apply may be called from any thread; calls are serialised on one connection.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "accounts/account_log.h"

struct sqlite3;

namespace tokimq::accounts {

// One message of a (possibly reduced) event.
struct Part {
  std::string msg_id;
  int seq = 0;
  int64_t amount = 0;
  int64_t born_ms = 0;  // when the producer sent it (lateness figures)
};

// What the handler gets per reduced event: the type, the status value and its messages
// (several when deposits or withdrawals were summed).
struct Reduced {
  std::string account;
  EventType type = EventType::kOpened;
  std::string status;
  std::vector<Part> parts;
};

struct ProjectionCounts {
  int64_t processed = 0;     // rows in processed
  int64_t violations = 0;    // rows in violations
  int64_t transactions = 0;  // committed Apply transactions (meta)
  int64_t duplicates = 0;    // parts skipped as already processed (meta)
};

class Projection {
 public:
  // Opens (creating) the database at `path`. Errors: Internal with SQLite's message.
  static absl::StatusOr<std::unique_ptr<Projection>> Open(const std::string& path);
  ~Projection();

  // Applies `events` (one account, in order) in one transaction; parts already processed are
  // skipped. `fail` = an injected failure: the transaction is rolled back and Unavailable
  // returned (nothing applied).
  absl::Status Apply(const std::vector<const Reduced*>& events, bool fail);

  absl::StatusOr<std::map<std::string, AccountState>> Accounts();
  absl::StatusOr<ProjectionCounts> Counts();
  // The violations' descriptions (at most `limit`).
  absl::StatusOr<std::vector<std::string>> Violations(int limit);

 private:
  explicit Projection(sqlite3* db) : db_(db) {}
  absl::Status Exec(const char* sql);
  absl::Status ApplyLocked(const Reduced& e, int64_t* duplicates);

  std::mutex mu_;
  sqlite3* db_;
};

}  // namespace tokimq::accounts
