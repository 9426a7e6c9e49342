// SqliteProcessOnce: a consumer's "process a message once" on SQLite (issue 16, the dual-write
// document's consumer half): in ONE SQLite transaction, record the message id in a
// processed-messages table (primary key) and run the user's business update; ACK the message to
// the broker only after that transaction committed.
//
//   - First delivery: the id is new; the business update runs and must report exactly one row
//     changed (its guarded UPDATE, e.g. `... WHERE id=? AND status='UNPAID'`), else the whole
//     transaction for that message is rolled back (kFailedPrecondition) and nothing is recorded.
//   - Redelivery (the consumer crashed after COMMIT but before the ACK, the lease expired, an ACK
//     reply was lost): the id is already there; the business update is NOT run and the result is
//     kDuplicate. The caller ACKs it.
// So a committed business change and its "processed" mark are never apart, and a redelivery
// never applies twice. External side effects (emails, payments at a PSP) need their own
// idempotency key: SQLite cannot roll them back.
//
// Table (created if missing; the name is an option):
//   CREATE TABLE processed_messages(message_id TEXT PRIMARY KEY NOT NULL,
//                                   processed_at_ms INTEGER NOT NULL) WITHOUT ROWID
// processed_at_ms: Clock::NowMs() of the transaction (ms since the Unix epoch). Purge() deletes
// old ids; keep them longer than a message can be redelivered (max attempts x backoff + lease),
// or a late redelivery would apply again.
//
// Ownership: borrows the SqliteConnection (WAL mode, see client/sqlite_connection.h), which
// also holds the user's business tables, and the Clock; both outlive this object.
// Thread-safety: like the connection, one thread at a time. Workers use one connection and one
// SqliteProcessOnce each; SQLite serialises their write transactions (BEGIN IMMEDIATE: a second
// writer waits up to the connection's busy timeout, then gets kUnavailable and nothing of its
// batch is committed). Give the connections of one process one shared
// SqliteOptions::writer_mutex so that they queue instead of sleeping in SQLite's busy handler.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/sqlite_connection.h"
#include "common/clock.h"

namespace tokimq::client {

enum class ProcessOutcome {
  kApplied,    // business update ran (exactly one row changed) and the id is recorded
  kDuplicate,  // the id was already recorded: nothing ran; ACK the message
};

// Runs inside the transaction on the same connection. Returns how many rows its guarded update
// changed; anything but 1 aborts this message's part of the transaction. An error aborts it too
// and is returned as the message's result.
using BusinessUpdate = std::function<absl::StatusOr<int64_t>(SqliteConnection& db)>;

struct ProcessItem {
  std::string message_id;
  BusinessUpdate update;
};

struct ProcessOnceOptions {
  std::string table = "processed_messages";  // [A-Za-z_][A-Za-z0-9_]*
  Clock* clock = SystemClock::Default();
};

class SqliteProcessOnce {
 public:
  // Creates the table if missing. kInvalidArgument for a bad table name; SQLite errors as
  // SqliteConnection.
  static absl::StatusOr<SqliteProcessOnce> Create(SqliteConnection* db,
                                                  ProcessOnceOptions options = {});

  // One message in its own transaction. Result: kApplied, kDuplicate, or an error:
  // kFailedPrecondition "changed N rows" (rolled back; the caller decides, e.g. ACK a timeout of
  // an order that was paid meanwhile), the update's own error, or the connection's (kUnavailable
  // when the write lock stayed busy). Durable on return per the connection's synchronous mode.
  absl::StatusOr<ProcessOutcome> Process(const std::string& message_id,
                                         const BusinessUpdate& update);

  // Many messages in ONE transaction (one commit, one fsync), each inside its own SAVEPOINT so
  // one message's abort rolls back only that message. Returns one result per item, same order,
  // as Process. The call itself fails (and nothing is committed) when BEGIN or COMMIT fails.
  // A message id repeated within the batch is kDuplicate from its second occurrence on.
  absl::StatusOr<std::vector<absl::StatusOr<ProcessOutcome>>> ProcessBatch(
      const std::vector<ProcessItem>& items);

  absl::StatusOr<bool> IsProcessed(const std::string& message_id);
  // Deletes ids processed before `before_ms` (ms since epoch); returns how many.
  absl::StatusOr<int64_t> Purge(int64_t before_ms);

  const std::string& table() const { return table_; }

 private:
  SqliteProcessOnce(SqliteConnection* db, std::string table, Clock* clock);
  absl::StatusOr<ProcessOutcome> ProcessInSavepoint(const ProcessItem& item, int64_t now_ms);

  SqliteConnection* db_;
  std::string table_;
  Clock* clock_;
  std::string insert_sql_, select_sql_, purge_sql_;
};

}  // namespace tokimq::client
