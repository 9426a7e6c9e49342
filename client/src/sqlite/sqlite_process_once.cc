#include "client/sqlite_process_once.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tokimq::client {
namespace {

bool ValidTableName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace

SqliteProcessOnce::SqliteProcessOnce(SqliteConnection* db, std::string table, Clock* clock)
    : db_(db),
      table_(std::move(table)),
      clock_(clock),
      insert_sql_(absl::StrCat("INSERT INTO ", table_,
                               "(message_id, processed_at_ms) VALUES(?1, ?2) "
                               "ON CONFLICT(message_id) DO NOTHING")),
      select_sql_(absl::StrCat("SELECT 1 FROM ", table_, " WHERE message_id = ?1")),
      purge_sql_(absl::StrCat("DELETE FROM ", table_, " WHERE processed_at_ms < ?1")) {}

absl::StatusOr<SqliteProcessOnce> SqliteProcessOnce::Create(SqliteConnection* db,
                                                            ProcessOnceOptions options) {
  if (!ValidTableName(options.table)) {
    return absl::InvalidArgumentError(
        absl::StrCat("process-once: bad table name '", options.table, "'"));
  }
  const std::string ddl = absl::StrCat(
      "CREATE TABLE IF NOT EXISTS ", options.table,
      "(message_id TEXT PRIMARY KEY NOT NULL, processed_at_ms INTEGER NOT NULL) WITHOUT ROWID");
  absl::Status s = db->WriteTransaction([&] { return db->ExecScript(ddl); });
  if (!s.ok()) return s;
  return SqliteProcessOnce(db, std::move(options.table), options.clock);
}

absl::StatusOr<ProcessOutcome> SqliteProcessOnce::ProcessInSavepoint(const ProcessItem& item,
                                                                     int64_t now_ms) {
  absl::Status s = db_->ExecScript("SAVEPOINT process_once");
  if (!s.ok()) return s;
  auto rollback = [&](absl::Status why) -> absl::Status {
    absl::Status r = db_->ExecScript("ROLLBACK TO process_once; RELEASE process_once");
    return r.ok() ? why : r;
  };
  // The id first: a duplicate never reaches the business update.
  auto inserted = db_->Exec(insert_sql_, {item.message_id, now_ms});
  if (!inserted.ok()) return rollback(inserted.status());
  if (*inserted == 0) {
    s = db_->ExecScript("RELEASE process_once");
    if (!s.ok()) return s;
    return ProcessOutcome::kDuplicate;
  }
  auto changed = item.update(*db_);
  if (!changed.ok()) return rollback(changed.status());
  if (*changed != 1) {
    return rollback(absl::FailedPreconditionError(
        absl::StrCat("process-once: business update for message ", item.message_id, " changed ",
                     *changed, " rows, expected exactly 1; rolled back")));
  }
  s = db_->ExecScript("RELEASE process_once");
  if (!s.ok()) return s;
  return ProcessOutcome::kApplied;
}

absl::StatusOr<std::vector<absl::StatusOr<ProcessOutcome>>> SqliteProcessOnce::ProcessBatch(
    const std::vector<ProcessItem>& items) {
  std::vector<absl::StatusOr<ProcessOutcome>> results;
  results.reserve(items.size());
  absl::Status s = db_->WriteTransaction([&]() -> absl::Status {
    const int64_t now_ms = clock_->NowMs();
    for (const ProcessItem& item : items) {
      results.push_back(ProcessInSavepoint(item, now_ms));
      if (!db_->in_transaction()) {  // SQLite rolled the whole transaction back (I/O error)
        return absl::InternalError(absl::StrCat("process-once: transaction rolled back by SQLite: ",
                                                results.back().status().ToString()));
      }
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return results;
}

absl::StatusOr<ProcessOutcome> SqliteProcessOnce::Process(const std::string& message_id,
                                                          const BusinessUpdate& update) {
  auto results = ProcessBatch({ProcessItem{message_id, update}});
  if (!results.ok()) return results.status();
  return std::move(results->front());
}

absl::StatusOr<bool> SqliteProcessOnce::IsProcessed(const std::string& message_id) {
  auto row = db_->QueryInt64(select_sql_, {message_id});
  if (!row.ok()) return row.status();
  return row->has_value();
}

absl::StatusOr<int64_t> SqliteProcessOnce::Purge(int64_t before_ms) {
  return db_->Exec(purge_sql_, {before_ms});
}

}  // namespace tokimq::client
