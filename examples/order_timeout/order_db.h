// OrderDb: the order-timeout example's orders in SQLite (WAL mode), <state-dir>/orders.db.
// The schema is documented in examples/order_timeout/README.md ("The SQLite schema"):
//   run(id=1, run_id, orders, timeout_ms, paid_ppm, seed)     the run's configuration
//   orders(id, status UNPAID|PAID|CANCELLED, created_ms, deadline_ms, paid_ms, cancelled_ms, sent)
//   order_events(order_id, event, message_id, at_ms)          one row per applied change, no
//                                                             unique key: the audit counts
//                                                             changes applied twice
//   processed_messages(message_id PRIMARY KEY, ...)           client/sqlite_process_once.h
//
// Every state change goes through SqliteProcessOnce: the guarded UPDATE (`WHERE id=? AND
// status='UNPAID'`, for a cancel also `AND deadline_ms <= now`) must change exactly one row, and
// the id of the message (cancel) or payment (pay) is recorded in the same transaction, so a
// redelivered timeout message or a repeated payment notification never applies twice.
//
// Ownership: owns one SqliteConnection. Thread-safety: one thread at a time; every worker thread
// opens its own OrderDb on the same file (SQLite serialises the writers, busy timeout 30 s).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/sqlite_connection.h"
#include "client/sqlite_process_once.h"
#include "common/clock.h"

namespace tokimq::order_timeout {

// One order to INSERT (UNPAID).
struct NewOrder {
  uint64_t id = 0;
  int64_t deadline_ms = 0;
  int64_t created_ms = 0;
};

// What a run is: fixed when the database is created, read back by --resume.
struct RunConfig {
  uint64_t run_id = 0;
  uint64_t orders = 0;
  int64_t timeout_ms = 0;
  uint32_t paid_ppm = 0;  // share of orders that pay, parts per million
  uint64_t seed = 0;      // payment plan seed
};

enum class OrderStatus { kNone, kUnpaid, kPaid, kCancelled };

struct OrderCounts {
  uint64_t created = 0, sent = 0, paid = 0, cancelled = 0;
};

// One cancel or payment to apply: the id that makes it process-once, and the order.
struct OrderChange {
  std::string message_id;
  uint64_t order_id = 0;
};

// What the database says at the end of a run (read back from disk).
struct OrderAudit {
  uint64_t created = 0, paid = 0, cancelled = 0;
  uint64_t both = 0;                // an order with a PAID and a CANCELLED event
  uint64_t missed = 0;              // not created, or still UNPAID
  uint64_t cancelled_early = 0;     // cancelled_ms < deadline_ms
  uint64_t duplicates_applied = 0;  // a message id or an order's final change applied twice
  uint64_t processed_ids = 0;       // rows of processed_messages
};

class OrderDb {
 public:
  // Creates the schema and the run row in `path`; kAlreadyExists if the file holds a run.
  static absl::Status CreateRun(const std::string& path, const RunConfig& config,
                                const client::SqliteOptions& options);
  // Opens an existing run (kNotFound if there is none).
  static absl::StatusOr<std::unique_ptr<OrderDb>> Open(const std::string& path,
                                                       const client::SqliteOptions& options,
                                                       Clock& clock);

  const RunConfig& config() const { return config_; }

  // The local transaction of order creation: inserts UNPAID orders for the ids not yet present
  // (deadline_ms, created at now_ms), and marks `sent_ids` sent, in one transaction. Returns
  // the ids it inserted.
  absl::StatusOr<std::vector<uint64_t>> CreateOrders(const std::vector<uint64_t>& ids,
                                                     int64_t deadline_ms, int64_t now_ms,
                                                     const std::vector<uint64_t>& sent_ids = {});
  // The same with a deadline and creation time per order (a group commit of several batches).
  absl::StatusOr<std::vector<uint64_t>> CreateOrders(const std::vector<NewOrder>& orders,
                                                     const std::vector<uint64_t>& sent_ids = {});
  absl::Status MarkSent(const std::vector<uint64_t>& ids);

  // UNPAID -> CANCELLED when deadline_ms <= now_ms, each change process-once by its message id,
  // all in one transaction. One result per change (SqliteProcessOnce::ProcessBatch):
  // kFailedPrecondition when the order was not UNPAID-and-due (see Status to tell why).
  absl::StatusOr<std::vector<absl::StatusOr<client::ProcessOutcome>>> Cancel(
      const std::vector<OrderChange>& changes, int64_t now_ms);
  // UNPAID -> PAID, the same way (the payment id as the message id).
  absl::StatusOr<std::vector<absl::StatusOr<client::ProcessOutcome>>> Pay(
      const std::vector<OrderChange>& changes, int64_t now_ms);

  // The order's status and deadline (kNone: no such order).
  absl::StatusOr<std::pair<OrderStatus, int64_t>> Status(uint64_t id);
  // Counts of the run's orders (ids < config().orders; the killed creator's extra ids are not
  // counted: see RangeCounts).
  absl::StatusOr<OrderCounts> Counts();
  // Counts of the orders with lo <= id < hi.
  absl::StatusOr<OrderCounts> RangeCounts(uint64_t lo, uint64_t hi);
  // Ids with lo <= id < hi that exist (--resume: created by an earlier process).
  absl::StatusOr<std::vector<uint64_t>> ExistingIds(uint64_t lo, uint64_t hi);
  // --resume: UNPAID orders as (id, deadline_ms); `unsent_only`: only those not marked sent.
  absl::StatusOr<std::vector<std::pair<uint64_t, int64_t>>> Unpaid(bool unsent_only);
  absl::StatusOr<int64_t> MaxDeadlineMs();
  absl::StatusOr<OrderAudit> Audit();

  client::SqliteConnection& connection() { return *db_; }

 private:
  OrderDb(std::unique_ptr<client::SqliteConnection> db, client::SqliteProcessOnce once,
          RunConfig config);
  absl::StatusOr<std::vector<absl::StatusOr<client::ProcessOutcome>>> Apply(
      const std::vector<OrderChange>& changes, const char* update_sql, const char* event,
      int64_t now_ms);

  std::unique_ptr<client::SqliteConnection> db_;
  client::SqliteProcessOnce once_;
  RunConfig config_;
};

}  // namespace tokimq::order_timeout
