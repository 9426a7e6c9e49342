#include "order_timeout/order_db.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tokimq::order_timeout {
namespace {

using client::SqliteConnection;
using client::SqlValue;

constexpr char kSchema[] =
    "CREATE TABLE run(id INTEGER PRIMARY KEY CHECK (id = 1), run_id INTEGER NOT NULL,"
    " orders INTEGER NOT NULL, timeout_ms INTEGER NOT NULL, paid_ppm INTEGER NOT NULL,"
    " seed INTEGER NOT NULL);"
    "CREATE TABLE orders(id INTEGER PRIMARY KEY,"
    " status TEXT NOT NULL CHECK (status IN ('UNPAID', 'PAID', 'CANCELLED')),"
    " created_ms INTEGER NOT NULL, deadline_ms INTEGER NOT NULL, paid_ms INTEGER,"
    " cancelled_ms INTEGER, sent INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE order_events(order_id INTEGER NOT NULL, event TEXT NOT NULL,"
    " message_id TEXT NOT NULL, at_ms INTEGER NOT NULL);";

constexpr char kCancelSql[] =
    "UPDATE orders SET status = 'CANCELLED', cancelled_ms = ?2"
    " WHERE id = ?1 AND status = 'UNPAID' AND deadline_ms <= ?2";
constexpr char kPaySql[] =
    "UPDATE orders SET status = 'PAID', paid_ms = ?2"
    " WHERE id = ?1 AND status = 'UNPAID' AND deadline_ms > ?2";
constexpr char kEventSql[] =
    "INSERT INTO order_events(order_id, event, message_id, at_ms) VALUES(?1, ?2, ?3, ?4)";

absl::StatusOr<int64_t> Count(SqliteConnection& db, const char* sql) {
  auto v = db.QueryInt64(sql);
  if (!v.ok()) return v.status();
  return v->value_or(0);
}

}  // namespace

OrderDb::OrderDb(std::unique_ptr<SqliteConnection> db, client::SqliteProcessOnce once,
                 RunConfig config)
    : db_(std::move(db)), once_(std::move(once)), config_(config) {}

absl::Status OrderDb::CreateRun(const std::string& path, const RunConfig& c,
                                const client::SqliteOptions& options) {
  auto db = SqliteConnection::Open(path, options);
  if (!db.ok()) return db.status();
  auto has_run = (*db)->QueryInt64("SELECT 1 FROM sqlite_master WHERE name = 'run'");
  if (!has_run.ok()) return has_run.status();
  if (has_run->has_value()) {
    return absl::AlreadyExistsError(path + " already holds a run");
  }
  return (*db)->WriteTransaction([&]() -> absl::Status {
    absl::Status s = (*db)->ExecScript(kSchema);
    if (!s.ok()) return s;
    return (*db)
        ->Exec("INSERT INTO run VALUES(1, ?1, ?2, ?3, ?4, ?5)",
               {static_cast<int64_t>(c.run_id), static_cast<int64_t>(c.orders), c.timeout_ms,
                int64_t{c.paid_ppm}, static_cast<int64_t>(c.seed)})
        .status();
  });
}

absl::StatusOr<std::unique_ptr<OrderDb>> OrderDb::Open(const std::string& path,
                                                       const client::SqliteOptions& options,
                                                       Clock& clock) {
  auto db = SqliteConnection::Open(path, options);
  if (!db.ok()) return db.status();
  RunConfig c;
  const char* cols[] = {"run_id", "orders", "timeout_ms", "paid_ppm", "seed"};
  int64_t values[5] = {};
  for (int i = 0; i < 5; ++i) {
    auto v = (*db)->QueryInt64(absl::StrCat("SELECT ", cols[i], " FROM run WHERE id = 1"));
    if (!v.ok() || !v->has_value()) {
      return absl::NotFoundError(
          absl::StrCat(path, " holds no run: ", v.ok() ? "empty" : v.status().ToString()));
    }
    values[i] = **v;
  }
  c.run_id = static_cast<uint64_t>(values[0]);
  c.orders = static_cast<uint64_t>(values[1]);
  c.timeout_ms = values[2];
  c.paid_ppm = static_cast<uint32_t>(values[3]);
  c.seed = static_cast<uint64_t>(values[4]);
  client::ProcessOnceOptions po;
  po.clock = &clock;
  auto once = client::SqliteProcessOnce::Create(db->get(), po);
  if (!once.ok()) return once.status();
  return std::unique_ptr<OrderDb>(new OrderDb(std::move(*db), std::move(*once), c));
}

absl::StatusOr<std::vector<uint64_t>> OrderDb::CreateOrders(const std::vector<uint64_t>& ids,
                                                            int64_t deadline_ms, int64_t now_ms,
                                                            const std::vector<uint64_t>& sent_ids) {
  std::vector<NewOrder> orders;
  orders.reserve(ids.size());
  for (uint64_t id : ids) orders.push_back({id, deadline_ms, now_ms});
  return CreateOrders(orders, sent_ids);
}

absl::StatusOr<std::vector<uint64_t>> OrderDb::CreateOrders(const std::vector<NewOrder>& orders,
                                                            const std::vector<uint64_t>& sent_ids) {
  std::vector<uint64_t> inserted;
  absl::Status s = db_->WriteTransaction([&]() -> absl::Status {
    for (const NewOrder& o : orders) {
      auto n = db_->Exec(
          "INSERT INTO orders(id, status, created_ms, deadline_ms) VALUES(?1, 'UNPAID', ?2, ?3)"
          " ON CONFLICT(id) DO NOTHING",
          {static_cast<int64_t>(o.id), o.created_ms, o.deadline_ms});
      if (!n.ok()) return n.status();
      if (*n == 1) inserted.push_back(o.id);
    }
    for (uint64_t id : sent_ids) {
      auto n = db_->Exec("UPDATE orders SET sent = 1 WHERE id = ?1", {static_cast<int64_t>(id)});
      if (!n.ok()) return n.status();
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return inserted;
}

absl::Status OrderDb::MarkSent(const std::vector<uint64_t>& ids) {
  if (ids.empty()) return absl::OkStatus();
  return CreateOrders({}, 0, 0, ids).status();
}

absl::StatusOr<std::vector<absl::StatusOr<client::ProcessOutcome>>> OrderDb::Apply(
    const std::vector<OrderChange>& changes, const char* update_sql, const char* event,
    int64_t now_ms) {
  std::vector<client::ProcessItem> items;
  items.reserve(changes.size());
  for (const OrderChange& c : changes) {
    const auto id = static_cast<int64_t>(c.order_id);
    items.push_back(
        {c.message_id,
         [&c, id, update_sql, event, now_ms](SqliteConnection& db) -> absl::StatusOr<int64_t> {
           auto n = db.Exec(update_sql, {id, now_ms});
           if (!n.ok() || *n != 1) return n;
           auto e = db.Exec(kEventSql, {id, std::string(event), c.message_id, now_ms});
           if (!e.ok()) return e.status();
           return n;
         }});
  }
  return once_.ProcessBatch(items);
}

absl::StatusOr<std::vector<absl::StatusOr<client::ProcessOutcome>>> OrderDb::Cancel(
    const std::vector<OrderChange>& changes, int64_t now_ms) {
  return Apply(changes, kCancelSql, "CANCELLED", now_ms);
}

absl::StatusOr<std::vector<absl::StatusOr<client::ProcessOutcome>>> OrderDb::Pay(
    const std::vector<OrderChange>& changes, int64_t now_ms) {
  return Apply(changes, kPaySql, "PAID", now_ms);
}

absl::StatusOr<std::pair<OrderStatus, int64_t>> OrderDb::Status(uint64_t id) {
  const std::vector<SqlValue> key = {static_cast<int64_t>(id)};
  auto code = db_->QueryInt64(
      "SELECT CASE status WHEN 'UNPAID' THEN 1 WHEN 'PAID' THEN 2 ELSE 3 END FROM orders"
      " WHERE id = ?1",
      key);
  if (!code.ok()) return code.status();
  if (!code->has_value()) return std::make_pair(OrderStatus::kNone, int64_t{0});
  auto deadline = db_->QueryInt64("SELECT deadline_ms FROM orders WHERE id = ?1", key);
  if (!deadline.ok()) return deadline.status();
  return std::make_pair(static_cast<OrderStatus>(**code), deadline->value_or(0));
}

absl::StatusOr<OrderCounts> OrderDb::Counts() { return RangeCounts(0, config_.orders); }

absl::StatusOr<OrderCounts> OrderDb::RangeCounts(uint64_t lo, uint64_t hi) {
  OrderCounts c;
  const char* sql[] = {
      "SELECT COUNT(*) FROM orders WHERE id >= ?1 AND id < ?2",
      "SELECT SUM(sent) FROM orders WHERE id >= ?1 AND id < ?2",
      "SELECT COUNT(*) FROM orders WHERE status = 'PAID' AND id >= ?1 AND id < ?2",
      "SELECT COUNT(*) FROM orders WHERE status = 'CANCELLED' AND id >= ?1 AND id < ?2"};
  uint64_t* out[] = {&c.created, &c.sent, &c.paid, &c.cancelled};
  const std::vector<SqlValue> range = {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  for (int i = 0; i < 4; ++i) {
    auto v = db_->QueryInt64(sql[i], range);
    if (!v.ok()) return v.status();
    *out[i] = static_cast<uint64_t>(v->value_or(0));
  }
  return c;
}

absl::StatusOr<std::vector<uint64_t>> OrderDb::ExistingIds(uint64_t lo, uint64_t hi) {
  auto ids = db_->QueryInt64Column("SELECT id FROM orders WHERE id >= ?1 AND id < ?2",
                                   {static_cast<int64_t>(lo), static_cast<int64_t>(hi)});
  if (!ids.ok()) return ids.status();
  return std::vector<uint64_t>(ids->begin(), ids->end());
}

absl::StatusOr<std::vector<std::pair<uint64_t, int64_t>>> OrderDb::Unpaid(bool unsent_only) {
  const std::vector<SqlValue> n = {static_cast<int64_t>(config_.orders)};
  auto ids = db_->QueryInt64Column(
      unsent_only ? "SELECT id FROM orders WHERE status = 'UNPAID' AND sent = 0 AND id < ?1"
                  : "SELECT id FROM orders WHERE status = 'UNPAID' AND id < ?1",
      n);
  if (!ids.ok()) return ids.status();
  auto deadlines = db_->QueryInt64Column(
      unsent_only
          ? "SELECT deadline_ms FROM orders WHERE status = 'UNPAID' AND sent = 0 AND id < ?1"
          : "SELECT deadline_ms FROM orders WHERE status = 'UNPAID' AND id < ?1",
      n);
  if (!deadlines.ok()) return deadlines.status();
  if (deadlines->size() != ids->size()) return absl::AbortedError("orders changed while read");
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (size_t i = 0; i < ids->size(); ++i) {
    out.emplace_back(static_cast<uint64_t>((*ids)[i]), (*deadlines)[i]);
  }
  return out;
}

absl::StatusOr<int64_t> OrderDb::MaxDeadlineMs() {
  return Count(*db_, "SELECT MAX(deadline_ms) FROM orders");
}

absl::StatusOr<OrderAudit> OrderDb::Audit() {
  OrderAudit a;
  const char* sql[] = {
      "SELECT COUNT(*) FROM orders WHERE id < ?1",
      "SELECT COUNT(*) FROM orders WHERE status = 'PAID' AND id < ?1",
      "SELECT COUNT(*) FROM orders WHERE status = 'CANCELLED' AND id < ?1",
      "SELECT COUNT(*) FROM (SELECT order_id FROM order_events GROUP BY order_id"
      " HAVING SUM(event = 'PAID') > 0 AND SUM(event = 'CANCELLED') > 0)",
      "SELECT COUNT(*) FROM orders WHERE status = 'UNPAID' AND id < ?1",
      "SELECT COUNT(*) FROM orders WHERE status = 'CANCELLED' AND cancelled_ms < deadline_ms",
      "SELECT (SELECT COUNT(*) FROM (SELECT message_id FROM order_events GROUP BY message_id"
      " HAVING COUNT(*) > 1)) + (SELECT COUNT(*) FROM (SELECT order_id FROM order_events"
      " GROUP BY order_id HAVING COUNT(*) > 1))",
      "SELECT COUNT(*) FROM processed_messages"};
  uint64_t* out[] = {&a.created,
                     &a.paid,
                     &a.cancelled,
                     &a.both,
                     &a.missed,
                     &a.cancelled_early,
                     &a.duplicates_applied,
                     &a.processed_ids};
  for (int i = 0; i < 8; ++i) {
    const bool ranged = std::string_view(sql[i]).find("?1") != std::string_view::npos;
    auto v =
        db_->QueryInt64(sql[i], ranged ? std::vector<SqlValue>{static_cast<int64_t>(config_.orders)}
                                       : std::vector<SqlValue>{});
    if (!v.ok()) return v.status();
    *out[i] = static_cast<uint64_t>(v->value_or(0));
  }
  a.missed += config_.orders - a.created;  // never created
  return a;
}

}  // namespace tokimq::order_timeout
