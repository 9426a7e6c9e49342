// tokimq-accounts: the ordering seed's bank-account example on a real broker (issue 23).
//
//   produce  publishes the account log (GenerateLog) to a FIFO topic, one message group per
//            account, with the ordering headers (ORD_KEY, ORD_TAG, ORD_MODE).
//   consume  runs the OrderedConsumer into the SQLite projection (projection.h) until every
//            event is processed or --timeout-s passes; --fail-rate injects handler failures;
//            --max-per-group 1 is the one-message-per-group FIFO consumer. Prints a RESULT line.
//   check    compares the projection with a sequential replay of the log: balances and
//            statuses equal, every event processed once, no event applied to an account that
//            was not open. Exit 0 when all hold, 1 otherwise.
// Exit code 2: usage or setup error. scripts/accounts-demo.sh drives all three.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "accounts/account_log.h"
#include "accounts/projection.h"
#include "client/ordering/ordered_consumer.h"
#include "client/ordering/properties.h"
#include "client/producer.h"
#include "common/clock.h"
#include "common/property_keys.h"

namespace ac = tokimq::accounts;
namespace ord = tokimq::ordering;

namespace {

struct Common {
  std::string broker = "127.0.0.1:9876";
  std::string topic = "accounts";
  int accounts = 200;
  int events = 50;
  uint64_t seed = 1;
};

int Produce(const Common& c) {
  tokimq::client::ClientOptions o;
  o.broker = c.broker;
  tokimq::client::Producer producer(o);
  const std::vector<ac::AccountEvent> log = ac::GenerateLog(c.accounts, c.events, c.seed);
  std::vector<tokimq::client::OutgoingMessage> batch;
  for (size_t i = 0; i < log.size(); ++i) {
    const ac::AccountEvent& e = log[i];
    tokimq::client::OutgoingMessage m;
    m.topic = c.topic;
    m.message_group = e.account;
    m.body = ac::EncodeBody(e);
    ord::EncodeOrderingProperties(
        {ord::HashOrderingKey(e.account), ord::EventTypeTag{static_cast<uint16_t>(e.type)},
         ac::OrderingOf(e)},
        &m.properties);
    batch.push_back(std::move(m));
    // One request at a time: a request's messages are stored in order (docs/ordering.md).
    if (batch.size() == 256 || i + 1 == log.size()) {
      auto r = producer.SendBatch(batch);
      if (!r.ok()) {
        std::fprintf(stderr, "produce: %s\n", r.status().ToString().c_str());
        return 2;
      }
      batch.clear();
    }
  }
  std::printf("produced %zu events for %d accounts\n", log.size(), c.accounts);
  return 0;
}

struct ConsumeFlags {
  std::string group = "accounts-projection";
  std::string db = "accounts.db";
  double fail_rate = 0;
  int max_per_group = 16;
  int max_messages = 256;
  size_t pollers = 2;
  size_t threads = 4;
  int64_t invisible_ms = 5'000;
  int timeout_s = 300;
  std::string label = "ordered";
};

ord::OrderedConsumerOptions ConsumerOptions(const Common& c, const ConsumeFlags& f) {
  ord::OrderedConsumerOptions o;
  o.topic = c.topic;
  o.max_messages = f.max_messages;
  o.max_per_group = f.max_per_group;
  o.invisible_ms = f.invisible_ms;
  o.long_poll_ms = 500;
  o.pollers = f.pollers;
  o.nack_delay_ms = 100;  // a failed handler call is retried soon (the demo's failures pass)
  o.executor.threads = f.threads;
  o.executor.max_batch = 64;
  return o;
}

// The RESULT line of a consume run; `lateness` sorted.
// `fresh`: events this run processed (the others were processed before it started).
void PrintResult(const ConsumeFlags& f, int64_t processed, int64_t fresh, int64_t total,
                 double secs, size_t batches, const ord::BatchReport& sum,
                 const std::vector<int64_t>& lateness) {
  auto pct = [&](double q) {
    return lateness.empty()
               ? 0
               : lateness[std::min(lateness.size() - 1, static_cast<size_t>(q * lateness.size()))];
  };
  std::printf(
      "RESULT consumer=%s max_per_group=%d events=%lld/%lld this_run=%lld seconds=%.2f "
      "events_per_s=%.0f "
      "batches=%zu records=%zu handler_calls=%zu calls_per_event=%.3f reduced_events=%zu "
      "failed_keys=%zu nacked=%zu stale_acks=%zu renewals=%zu lateness_p50_ms=%lld "
      "lateness_p99_ms=%lld\n",
      f.label.c_str(), f.max_per_group, static_cast<long long>(processed),
      static_cast<long long>(total), static_cast<long long>(fresh), secs, fresh / secs, batches,
      sum.records, sum.handler_calls,
      sum.records ? static_cast<double>(sum.handler_calls) / sum.records : 0.0, sum.events,
      sum.failed_keys, sum.nacked, sum.stale_acks, sum.renewals, static_cast<long long>(pct(0.5)),
      static_cast<long long>(pct(0.99)));
}

absl::StatusOr<ac::Reduced> Decode(const tokimq::client::ReceivedMessage& m) {
  auto g = m.properties.find(tokimq::prop::kMessageGroup);
  if (g == m.properties.end()) return absl::InvalidArgumentError("no message group");
  absl::StatusOr<ac::AccountEvent> e = ac::DecodeBody(g->second, m.body);
  if (!e.ok()) return e.status();
  ac::Reduced r;
  r.account = e->account;
  r.type = e->type;
  r.status = e->status;
  r.parts.push_back({m.message_id, e->seq, e->amount, m.born_ms});
  return r;
}

int Consume(const Common& c, const ConsumeFlags& f) {
  auto proj = ac::Projection::Open(f.db);
  if (!proj.ok()) {
    std::fprintf(stderr, "consume: %s\n", proj.status().ToString().c_str());
    return 2;
  }
  const int64_t total = static_cast<int64_t>(ac::GenerateLog(c.accounts, c.events, c.seed).size());
  tokimq::client::ClientOptions co;
  co.broker = c.broker;
  tokimq::client::SimpleConsumer sc(co, f.group);
  const ord::OrderedConsumerOptions o = ConsumerOptions(c, f);

  std::mutex mu;
  std::mt19937_64 rng(std::random_device{}());
  std::vector<int64_t> lateness;  // ms from consumer start (or birth, if later) to application
  const int64_t start_ms = tokimq::SystemClock::Default()->NowMs();
  auto initial = (*proj)->Counts();
  const int64_t before = initial.ok() ? initial->processed : 0;
  ord::OrderedConsumer<ac::Reduced> consumer(
      &sc, o, Decode, [&](const ord::HandlerCall<ac::Reduced>& call) {
        bool fail = false;
        {
          std::lock_guard<std::mutex> l(mu);
          fail = std::uniform_real_distribution<double>(0, 1)(rng) < f.fail_rate;
        }
        std::vector<const ac::Reduced*> events;
        for (const auto& e : call.events) events.push_back(&e.event);
        absl::Status s = (*proj)->Apply(events, fail);
        if (s.ok()) {
          const int64_t now = tokimq::SystemClock::Default()->NowMs();
          std::lock_guard<std::mutex> l(mu);
          for (const auto& e : call.events) {
            for (const ac::Part& p : e.event.parts) {
              lateness.push_back(now - std::max(p.born_ms, start_ms));
            }
          }
        }
        return s;
      });
  auto sum_parts = ord::TypeAlgebra<ac::Reduced>{[](ac::Reduced& acc, const ac::Reduced& next) {
    acc.parts.insert(acc.parts.end(), next.parts.begin(), next.parts.end());
    return true;
  }};
  consumer.RegisterType(ord::EventTypeTag{static_cast<uint16_t>(ac::EventType::kDeposited)},
                        sum_parts);
  consumer.RegisterType(ord::EventTypeTag{static_cast<uint16_t>(ac::EventType::kWithdrawn)},
                        sum_parts);
  ord::BatchReport sum;
  size_t batches = 0;
  consumer.Start([&](const ord::BatchReport& r) {
    std::lock_guard<std::mutex> l(mu);
    ++batches;
    sum.records += r.records;
    sum.handler_calls += r.handler_calls;
    sum.events += r.events;
    sum.failed_keys += r.failed_keys;
    sum.acked += r.acked;
    sum.stale_acks += r.stale_acks;
    sum.nacked += r.nacked;
    sum.renewals += r.renewals;
  });
  int64_t processed = 0;
  for (int i = 0; i < f.timeout_s * 10; ++i) {
    auto counts = (*proj)->Counts();
    processed = counts.ok() ? counts->processed : 0;
    if (processed >= total) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int64_t end_ms = tokimq::SystemClock::Default()->NowMs();
  consumer.Stop();
  std::lock_guard<std::mutex> l(mu);
  std::sort(lateness.begin(), lateness.end());
  PrintResult(f, processed, processed - before, total,
              std::max<int64_t>(end_ms - start_ms, 1) / 1000.0, batches, sum, lateness);
  return processed >= total ? 0 : 1;
}

int Check(const Common& c, const std::string& db) {
  auto proj = ac::Projection::Open(db);
  if (!proj.ok()) {
    std::fprintf(stderr, "check: %s\n", proj.status().ToString().c_str());
    return 2;
  }
  const std::vector<ac::AccountEvent> log = ac::GenerateLog(c.accounts, c.events, c.seed);
  const auto want = ac::SequentialReplay(log);
  auto got = (*proj)->Accounts();
  auto counts = (*proj)->Counts();
  auto violations = (*proj)->Violations(10);
  if (!got.ok() || !counts.ok() || !violations.ok()) return 2;
  int mismatched = 0;
  for (const auto& [name, state] : want) {
    auto it = got->find(name);
    if (it == got->end() || !(it->second == state)) {
      if (++mismatched <= 10) {
        std::printf("MISMATCH %s: want balance=%lld status=%s open=%d, got %s\n", name.c_str(),
                    static_cast<long long>(state.balance), state.status.c_str(), state.open,
                    it == got->end() ? "nothing"
                                     : (std::to_string(it->second.balance) + " " +
                                        it->second.status + " " + std::to_string(it->second.open))
                                           .c_str());
      }
    }
  }
  for (const std::string& v : *violations) std::printf("VIOLATION %s\n", v.c_str());
  const bool ok = mismatched == 0 && counts->violations == 0 &&
                  counts->processed == static_cast<int64_t>(log.size()) &&
                  got->size() == want.size();
  std::printf(
      "CHECK %s accounts=%zu events=%zu processed=%lld mismatched=%d violations=%lld "
      "transactions=%lld duplicates_skipped=%lld\n",
      ok ? "ok" : "FAILED", want.size(), log.size(), static_cast<long long>(counts->processed),
      mismatched, static_cast<long long>(counts->violations),
      static_cast<long long>(counts->transactions), static_cast<long long>(counts->duplicates));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokimq-accounts: the ordering seed's bank accounts on a FIFO topic"};
  app.require_subcommand(1);
  Common c;
  ConsumeFlags f;
  auto add_common = [&](CLI::App* s) {
    s->add_option("--broker", c.broker, "host:port");
    s->add_option("--topic", c.topic, "FIFO topic");
    s->add_option("--accounts", c.accounts, "accounts");
    s->add_option("--events", c.events, "events per account (>= 4)");
    s->add_option("--seed", c.seed, "log seed");
  };
  CLI::App* produce = app.add_subcommand("produce", "publish the account log");
  add_common(produce);
  CLI::App* consume = app.add_subcommand("consume", "project the topic into SQLite");
  add_common(consume);
  consume->add_option("--group", f.group, "consumer group");
  consume->add_option("--db", f.db, "SQLite projection file");
  consume->add_option("--fail-rate", f.fail_rate, "share of handler calls that fail (0..1)");
  consume->add_option("--max-per-group", f.max_per_group, "messages per group per receive");
  consume->add_option("--max-messages", f.max_messages, "messages per receive");
  consume->add_option("--pollers", f.pollers, "batches in flight");
  consume->add_option("--threads", f.threads, "executor threads per poller");
  consume->add_option("--invisible-ms", f.invisible_ms, "lease per message");
  consume->add_option("--timeout-s", f.timeout_s, "give up after");
  consume->add_option("--label", f.label, "name in the RESULT line");
  CLI::App* check = app.add_subcommand("check", "compare the projection with a replay");
  add_common(check);
  check->add_option("--db", f.db, "SQLite projection file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (c.events < 4 || c.accounts < 1) {
    std::fprintf(stderr, "need --accounts >= 1 and --events >= 4\n");
    return 2;
  }
  if (*produce) return Produce(c);
  if (*consume) return Consume(c, f);
  return Check(c, f.db);
}
