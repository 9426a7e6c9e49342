// tokimq-tx-bench: transactional send + commit next to plain send, in the same run against the
// same broker, and the check-back latency after the immunity time (docs/transactions.md).
//
//   tokimq-tx-bench --broker 127.0.0.1:10911 --messages 20000 --threads 8 --checks 20
//
// Each of --threads threads sends synchronously: first --messages plain sends to a NORMAL
// topic, then --messages SendTransactional + EndTransaction(commit) pairs to a TRANSACTION
// topic (the order is swapped with --tx-first). Check-back: --checks halves with
// CHECK_IMMUNITY_TIME_IN_SECONDS=1 are left open; a second Producer's checker records when each
// check arrives; latency = arrival - (send + 1 s). Prints one "RESULT k=v ..." line.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "client/admin.h"
#include "client/producer.h"

namespace {

using Clock = std::chrono::steady_clock;
using tokimq::client::OutgoingMessage;
using tokimq::client::Producer;
using tokimq::client::TransactionResolution;

double RunThreads(int threads, int64_t messages, const std::function<bool(int64_t)>& one) {
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  auto start = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int64_t i = next++; i < messages && !failed; i = next++) {
        if (!one(i)) failed = true;
      }
    });
  }
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  return failed ? -1 : static_cast<double>(messages) / secs;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokimq-tx-bench"};
  tokimq::client::ClientOptions o;
  int64_t messages = 20000;
  int threads = 8;
  int checks = 20;
  bool tx_first = false;
  app.add_option("--broker", o.broker, "host:port");
  app.add_option("--messages", messages, "messages per kind");
  app.add_option("--threads", threads, "sending threads (one Producer each)");
  app.add_option("--checks", checks, "open halves for the check-back latency");
  app.add_flag("--tx-first", tx_first, "run the transactional phase first");
  CLI11_PARSE(app, argc, argv);

  tokimq::client::AdminClient admin(o);
  for (auto [name, type] : {std::pair{"txb_plain", tokimq::proto::NORMAL},
                            std::pair{"txb_tx", tokimq::proto::TRANSACTION}}) {
    tokimq::proto::TopicConfig t;
    t.set_name(name);
    t.set_type(type);
    t.set_queues(8);
    (void)admin.CreateTopic(t);  // exists already: fine
  }
  std::vector<std::unique_ptr<Producer>> producers;
  for (int t = 0; t < threads; ++t) producers.push_back(std::make_unique<Producer>(o));
  std::string body(100, 'x');
  auto producer_of = [&](int64_t i) { return producers[static_cast<size_t>(i % threads)].get(); };
  auto plain = [&](int64_t i) {
    OutgoingMessage m{.topic = "txb_plain", .body = body};
    auto r = producer_of(i)->Send(m);
    if (!r.ok()) std::fprintf(stderr, "plain send: %s\n", r.status().ToString().c_str());
    return r.ok();
  };
  auto tx = [&](int64_t i) {
    OutgoingMessage m{.topic = "txb_tx", .body = body};
    Producer* p = producer_of(i);
    auto r = p->SendTransactional(m);
    if (!r.ok()) {
      std::fprintf(stderr, "tx send: %s\n", r.status().ToString().c_str());
      return false;
    }
    absl::Status s = p->EndTransaction("txb_tx", r->receipt.message_id, r->transaction_id,
                                       TransactionResolution::kCommit);
    if (!s.ok()) std::fprintf(stderr, "commit: %s\n", s.ToString().c_str());
    return s.ok();
  };
  double plain_rate = 0, tx_rate = 0;
  if (tx_first) {
    tx_rate = RunThreads(threads, messages, tx);
    plain_rate = RunThreads(threads, messages, plain);
  } else {
    plain_rate = RunThreads(threads, messages, plain);
    tx_rate = RunThreads(threads, messages, tx);
  }
  std::printf("plain send:                 %.0f msg/s\n", plain_rate);
  std::printf("transactional send+commit:  %.0f msg/s (%.2f of plain)\n", tx_rate,
              tx_rate / plain_rate);

  // Check-back latency after the immunity time.
  std::mutex mu;
  std::map<std::string, Clock::time_point> sent, arrived;
  Producer checker(o);
  checker.SetTransactionChecker({"txb_tx"}, [&](const tokimq::client::TransactionCheck& c) {
    std::lock_guard<std::mutex> lock(mu);
    arrived.emplace(c.message_id, Clock::now());
    return TransactionResolution::kRollback;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the checker's first poll
  for (int i = 0; i < checks; ++i) {
    OutgoingMessage m{.topic = "txb_tx", .body = "orphan"};
    m.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] = "1";
    auto r = producers[0]->SendTransactional(m);
    if (!r.ok()) return 1;
    std::lock_guard<std::mutex> lock(mu);
    sent[r->receipt.message_id] = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(37));
  }
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    std::lock_guard<std::mutex> lock(mu);
    if (arrived.size() >= sent.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<double> lat;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [id, t] : sent) {
      auto a = arrived.find(id);
      if (a != arrived.end()) {
        lat.push_back(std::chrono::duration<double, std::milli>(a->second - t).count() - 1000);
      }
    }
  }
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    return lat.empty() ? -1 : lat[static_cast<size_t>(p * static_cast<double>(lat.size() - 1))];
  };
  std::printf("check-back after immunity:  %zu of %d checked, p50 %.0f ms, max %.0f ms\n",
              lat.size(), checks, pct(0.5), pct(1.0));
  std::printf("RESULT plain_msgs_per_s=%.0f tx_msgs_per_s=%.0f tx_ratio=%.3f check_p50_ms=%.0f "
              "check_max_ms=%.0f checked=%zu\n",
              plain_rate, tx_rate, tx_rate / plain_rate, pct(0.5), pct(1.0), lat.size());
  return lat.size() == static_cast<size_t>(checks) ? 0 : 1;
}
