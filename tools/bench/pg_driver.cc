// PostgreSQL jobs-table delay queue driver (libpq): see drivers.h.
//
// The table is the one pg-boss, River, graphile-worker and Solid Queue build on, reduced to what
// the workloads use:
//   <queue>(id bigserial primary key, run_at bigint, locked_until bigint, body text)
// run_at and locked_until are ms since the Unix epoch (the bench's clock, like the Redis score).
// A job is due when GREATEST(run_at, locked_until) <= now: never run before its time, not while
// a consumer holds its lease. One expression index on (GREATEST(run_at, locked_until), id) serves
// the claim, which is the usual SKIP LOCKED step:
//   WITH next AS (SELECT id FROM q WHERE GREATEST(..) <= now ORDER BY GREATEST(..), id
//                 LIMIT n FOR UPDATE SKIP LOCKED)
//   UPDATE q SET locked_until = now + lease FROM next WHERE q.id = next.id RETURNING q.id, q.body
// ACK is DELETE ... WHERE id = ANY($1). Sends are one INSERT ... SELECT FROM unnest($1, $2) per
// batch; a producer keeps up to --pipeline batches in flight with libpq's pipeline mode (each
// batch its own transaction, as each Redis ZADD / tokimq send is its own request). Consumers poll
// every 1 ms when nothing is due, as the Redis driver does (a table cannot block a reader).
// Durability is the server's setting (synchronous_commit), chosen by bench/compare.sh.
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "drivers.h"

namespace tokimq::bench {
namespace {

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

absl::Status ConnError(PGconn* c, const std::string& what) {
  std::string msg = PQerrorMessage(c);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return absl::UnavailableError(absl::StrCat("postgresql: ", what, ": ", msg));
}

// "host:port" -> a libpq connection as user postgres to database postgres (what compare.sh's
// temp cluster has; PGUSER / PGDATABASE / PGPASSWORD in the environment override).
absl::StatusOr<Conn> Connect(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("postgresql: addr is host:port");
  std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
  const char* user = std::getenv("PGUSER");
  const char* db = std::getenv("PGDATABASE");
  const char* keys[] = {"host", "port", "user", "dbname", "connect_timeout", "application_name",
                        nullptr};
  const char* values[] = {host.c_str(), port.c_str(), user ? user : "postgres",
                          db ? db : "postgres", "5", "tokimq-bench", nullptr};
  Conn c(PQconnectdbParams(keys, values, 0));
  if (!c) return absl::ResourceExhaustedError("postgresql: out of memory");
  if (PQstatus(c.get()) != CONNECTION_OK) return ConnError(c.get(), "connect");
  return c;
}

absl::Status Exec(PGconn* c, const std::string& sql) {
  Result r(PQexec(c, sql.c_str()));
  const ExecStatusType s = PQresultStatus(r.get());
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) return ConnError(c, sql.substr(0, 60));
  return absl::OkStatus();
}

absl::Status Prepare(PGconn* c, const char* name, const std::string& sql, int nparams) {
  Result r(PQprepare(c, name, sql.c_str(), nparams, nullptr));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return ConnError(c, absl::StrCat("prepare ", name));
  return absl::OkStatus();
}

// A PostgreSQL array literal of ids / bodies. Bodies are the bench's ASCII text; quotes and
// backslashes are escaped all the same.
std::string TextArray(const std::vector<BenchMessage>& batch) {
  std::string out = "{";
  for (size_t i = 0; i < batch.size(); ++i) {
    if (i) out.push_back(',');
    out.push_back('"');
    for (char ch : batch[i].body) {
      if (ch == '"' || ch == '\\') out.push_back('\\');
      out.push_back(ch);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::string DueExpr() { return "GREATEST(run_at, locked_until)"; }

class PgProducer final : public ProducerSession {
 public:
  PgProducer(Conn c, int pipeline) : c_(std::move(c)), pipeline_(pipeline) {}

  absl::Status Send(std::vector<BenchMessage> batch) override {
    std::string run_at = "{";
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i) run_at.push_back(',');
      run_at += std::to_string(batch[i].deliver_ms);
    }
    run_at.push_back('}');
    const std::string bodies = TextArray(batch);
    const char* params[] = {run_at.c_str(), bodies.c_str()};
    if (!PQsendQueryPrepared(c_.get(), "insert", 2, params, nullptr, nullptr, 0) ||
        !PQpipelineSync(c_.get())) {
      return ConnError(c_.get(), "send insert");
    }
    ++pending_;
    while (pending_ >= pipeline_) {
      absl::Status st = ReadOne();
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    while (pending_ > 0) {
      absl::Status st = ReadOne();
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  // One pipelined INSERT: its result, the NULL that ends it, then the sync point.
  absl::Status ReadOne() {
    --pending_;
    absl::Status st = absl::OkStatus();
    while (true) {
      Result r(PQgetResult(c_.get()));
      if (!r) continue;  // end of one query's results; the sync result follows
      const ExecStatusType s = PQresultStatus(r.get());
      if (s == PGRES_PIPELINE_SYNC) return st;
      if (s != PGRES_COMMAND_OK && st.ok()) {
        st = absl::InternalError(absl::StrCat("postgresql: insert: ",
                                              PQresultErrorMessage(r.get())));
      }
      if (PQstatus(c_.get()) != CONNECTION_OK) return ConnError(c_.get(), "insert");
    }
  }

  Conn c_;
  int pipeline_;
  int pending_ = 0;
};

class PgConsumer final : public ConsumerSession {
 public:
  PgConsumer(Conn c, int64_t lease_ms) : c_(std::move(c)), lease_ms_(lease_ms) {}

  absl::StatusOr<std::vector<Received>> Receive(int max, int64_t wait_ms) override {
    return AckAndReceive({}, max, wait_ms);
  }

  // The DELETE runs in the claim's statement (a data-modifying CTE): one round trip.
  absl::StatusOr<std::vector<Received>> AckAndReceive(const std::vector<Received>& acks, int max,
                                                      int64_t wait_ms) override {
    Clock& clock = *SystemClock::Default();
    const int64_t until = clock.NowMs() + wait_ms;
    const std::string n = std::to_string(max);
    std::string ids = acks.empty() ? std::string() : IdArray(acks);  // first pass only
    while (true) {
      const int64_t now = clock.NowMs();
      const std::string now_s = std::to_string(now), lease_s = std::to_string(now + lease_ms_);
      const char* params[] = {now_s.c_str(), n.c_str(), lease_s.c_str(), ids.c_str()};
      Result r(ids.empty() ? PQexecPrepared(c_.get(), "claim", 3, params, nullptr, nullptr, 0)
                           : PQexecPrepared(c_.get(), "ack_claim", 4, params, nullptr, nullptr, 0));
      ids.clear();
      if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return ConnError(c_.get(), "claim");
      std::vector<Received> out;
      const int rows = PQntuples(r.get());
      out.reserve(static_cast<size_t>(rows));
      for (int i = 0; i < rows; ++i) {
        Received m;
        if (!ParseBody(PQgetvalue(r.get(), i, 1), &m.deliver_ms, &m.seq)) continue;
        m.handle = PQgetvalue(r.get(), i, 0);
        out.push_back(std::move(m));
      }
      if (!out.empty() || now >= until) return out;
      clock.WaitUntilMs(now + 1, std::chrono::milliseconds(1));  // poll, as the Redis driver
    }
  }

  absl::Status Ack(const std::vector<Received>& msgs) override {
    if (msgs.empty()) return absl::OkStatus();
    const std::string ids = IdArray(msgs);
    const char* params[] = {ids.c_str()};
    Result r(PQexecPrepared(c_.get(), "ack", 1, params, nullptr, nullptr, 0));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return ConnError(c_.get(), "ack");
    return absl::OkStatus();
  }

 private:
  // A bigint[] literal of the messages' ids: {1,2,3}.
  static std::string IdArray(const std::vector<Received>& msgs) {
    std::string ids = "{";
    for (size_t i = 0; i < msgs.size(); ++i) {
      if (i) ids.push_back(',');
      ids += msgs[i].handle;
    }
    ids.push_back('}');
    return ids;
  }
  Conn c_;
  int64_t lease_ms_;
};

class PgDriver final : public Driver {
 public:
  explicit PgDriver(const DriverOptions& o) : options_(o) {}

  absl::Status Setup() override {
    for (char ch : options_.queue) {
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) {
        return absl::InvalidArgumentError("postgresql: --queue must be [A-Za-z0-9_]");
      }
    }
    auto c = Connect(options_.addr);
    if (!c.ok()) return c.status();
    const std::string& q = Table();
    for (const std::string& sql :
         {std::string("SET client_min_messages TO warning"),  // no NOTICE for the DROP
          absl::StrCat("DROP TABLE IF EXISTS ", q),
          absl::StrCat("CREATE TABLE ", q,
                       " (id bigserial PRIMARY KEY, run_at bigint NOT NULL,"
                       " locked_until bigint NOT NULL DEFAULT 0, body text NOT NULL)"),
          absl::StrCat("CREATE INDEX ", q, "_due ON ", q, " ((", DueExpr(), "), id)")}) {
      absl::Status st = Exec(c->get(), sql);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<ProducerSession>> NewProducer() override {
    auto c = Connect(options_.addr);
    if (!c.ok()) return c.status();
    absl::Status st = Prepare(c->get(), "insert",
                              absl::StrCat("INSERT INTO ", Table(),
                                           " (run_at, body) SELECT * FROM unnest($1::bigint[],"
                                           " $2::text[])"),
                              2);
    if (!st.ok()) return st;
    if (!PQenterPipelineMode(c->get())) return ConnError(c->get(), "pipeline mode");
    return std::unique_ptr<ProducerSession>(
        new PgProducer(std::move(*c), std::max(1, options_.pipeline)));
  }

  absl::StatusOr<std::unique_ptr<ConsumerSession>> NewConsumer() override {
    auto c = Connect(options_.addr);
    if (!c.ok()) return c.status();
    const std::string& q = Table();
    // Claim: lease the next due rows. Ack + claim: the last batch's DELETE in the same
    // statement (a data-modifying CTE; the deleted rows are leased, so the claim cannot pick
    // them although its snapshot still sees them).
    const std::string next = absl::StrCat("next AS (SELECT id FROM ", q, " WHERE ", DueExpr(),
                                          " <= $1::bigint ORDER BY ", DueExpr(),
                                          ", id LIMIT $2::int FOR UPDATE SKIP LOCKED)");
    const std::string update =
        absl::StrCat(" UPDATE ", q, " SET locked_until = $3::bigint FROM next WHERE ", q,
                     ".id = next.id RETURNING ", q, ".id, ", q, ".body");
    absl::Status st = Prepare(c->get(), "claim", absl::StrCat("WITH ", next, update), 3);
    if (st.ok()) {
      st = Prepare(c->get(), "ack_claim",
                   absl::StrCat("WITH done AS (DELETE FROM ", q,
                                " WHERE id = ANY($4::bigint[])), ", next, update),
                   4);
    }
    if (st.ok()) {
      st = Prepare(c->get(), "ack",
                   absl::StrCat("DELETE FROM ", q, " WHERE id = ANY($1::bigint[])"), 1);
    }
    if (!st.ok()) return st;
    return std::unique_ptr<ConsumerSession>(new PgConsumer(std::move(*c), options_.lease_ms));
  }

  absl::Status Ping() override {
    auto c = Connect(options_.addr);  // refused while the server replays its WAL
    if (!c.ok()) return c.status();
    return Exec(c->get(), "SELECT 1");
  }

 private:
  const std::string& Table() {
    if (table_.empty()) table_ = "tokimq_bench_" + options_.queue;
    return table_;
  }
  DriverOptions options_;
  std::string table_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Driver>> NewPostgresDriver(const DriverOptions& o) {
  return std::unique_ptr<Driver>(new PgDriver(o));
}

}  // namespace tokimq::bench
