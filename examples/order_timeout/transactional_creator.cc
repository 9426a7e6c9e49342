#include "order_timeout/transactional_creator.h"

#include <algorithm>
#include <cstdio>

namespace tokimq::order_timeout {
namespace {

void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

}  // namespace

TransactionalCreator::TransactionalCreator(JobOptions options, RunConfig config,
                                           PaymentSimulator* payer, Clock& clock, Metrics* metrics)
    : options_(std::move(options)),
      config_(config),
      payer_(payer),
      clock_(clock),
      metrics_(metrics) {}

TransactionalCreator::~TransactionalCreator() {
  Stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  checker_producer_.reset();  // stops the check-back thread before check_db_ goes
}

void TransactionalCreator::Start() {
  checker_producer_ = std::make_unique<client::Producer>(options_.client);
  checker_producer_->SetTransactionChecker(
      {options_.topic}, [this](const client::TransactionCheck& c) { return Check(c); });
  for (int p = 0; p < std::max(1, options_.producers); ++p) {
    producers_.push_back(std::make_unique<client::Producer>(options_.client));
    for (int w = 0; w < std::max(1, options_.window); ++w) {
      threads_.emplace_back([this, producer = producers_.back().get()] { Loop(producer); });
    }
  }
}

void TransactionalCreator::Stop() { stop_ = true; }

client::TransactionResolution TransactionalCreator::Check(const client::TransactionCheck& check) {
  uint64_t run = 0, id = 0;
  if (!ParseTimeoutBody(check.body, &run, &id) || run != config_.run_id) {
    Bump(metrics_->checks_unknown);  // not this run's: leave it to its own producer
    return client::TransactionResolution::kUnknown;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (in_flight_.count(id) != 0) {
    Bump(metrics_->checks_unknown);  // our local transaction may still commit it
    return client::TransactionResolution::kUnknown;
  }
  if (check_db_ == nullptr) {
    auto db = OrderDb::Open(options_.db_path, options_.sqlite, clock_);
    if (!db.ok()) {
      Bump(metrics_->checks_unknown);
      return client::TransactionResolution::kUnknown;
    }
    check_db_ = std::move(*db);
  }
  auto status = check_db_->Status(id);
  if (!status.ok()) {
    Bump(metrics_->checks_unknown);
    return client::TransactionResolution::kUnknown;
  }
  if (status->first == OrderStatus::kNone) {
    Bump(metrics_->checks_rollback);
    return client::TransactionResolution::kRollback;
  }
  // The row exists. Commit only the half written for that row: one whose deadline differs was
  // sent by an earlier, killed attempt at this order (the order was created again on --resume,
  // with its own timeout message), and committing it would deliver a second, early timeout.
  auto deadline = check.properties.find(kDeadlineProperty);
  if (deadline != check.properties.end() && deadline->second != std::to_string(status->second)) {
    Bump(metrics_->checks_rollback);
    return client::TransactionResolution::kRollback;
  }
  Bump(metrics_->checks_commit);
  return client::TransactionResolution::kCommit;
}

struct TransactionalCreator::CommitRequest {
  std::vector<NewOrder> orders;
  std::vector<uint64_t> sent;
  absl::StatusOr<std::vector<uint64_t>> result;
  bool done = false;
};

absl::StatusOr<std::vector<uint64_t>> TransactionalCreator::CommitLocal(
    OrderDb& db, std::vector<NewOrder> orders, std::vector<uint64_t> sent) {
  CommitRequest mine{std::move(orders), std::move(sent), std::vector<uint64_t>{}, false};
  std::unique_lock<std::mutex> lock(commit_mu_);
  commit_queue_.push_back(&mine);
  while (!mine.done) {
    if (committing_) {
      commit_cv_.wait(lock);
      continue;
    }
    // This thread leads: one transaction for everything queued so far (its own request too).
    committing_ = true;
    std::vector<CommitRequest*> group;
    group.swap(commit_queue_);
    lock.unlock();
    std::vector<NewOrder> all;
    std::vector<uint64_t> all_sent;
    for (const CommitRequest* r : group) {
      all.insert(all.end(), r->orders.begin(), r->orders.end());
      all_sent.insert(all_sent.end(), r->sent.begin(), r->sent.end());
    }
    auto inserted = db.CreateOrders(all, all_sent);
    std::unordered_set<uint64_t> in_db;
    if (inserted.ok()) in_db.insert(inserted->begin(), inserted->end());
    for (CommitRequest* r : group) {
      if (!inserted.ok()) {
        r->result = inserted.status();
        continue;
      }
      std::vector<uint64_t> ids;
      for (const NewOrder& o : r->orders) {
        if (in_db.count(o.id) != 0) ids.push_back(o.id);
      }
      r->result = std::move(ids);
    }
    lock.lock();
    for (CommitRequest* r : group) r->done = true;
    committing_ = false;
    commit_cv_.notify_all();
  }
  return std::move(mine.result);
}

void TransactionalCreator::CreateBatch(client::Producer& producer, OrderDb& db,
                                       std::vector<uint64_t> ids,
                                       std::vector<uint64_t>* committed) {
  const int64_t now = clock_.NowMs();
  const int64_t deadline = now + config_.timeout_ms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.insert(ids.begin(), ids.end());
  }
  // 1. The halves: stored durably, invisible until committed.
  std::vector<std::pair<uint64_t, client::TransactionReceipt>> halves;
  for (uint64_t id : ids) {
    while (!stop_) {
      auto r = producer.SendTransactional(TimeoutMessage(options_, config_.run_id, id, deadline));
      if (r.ok()) {
        halves.emplace_back(id, std::move(*r));
        break;
      }
      Bump(metrics_->send_errors);  // broker down or restarting: try again
      clock_.WaitUntilMs(clock_.NowMs() + 300, std::chrono::milliseconds(300));
    }
  }
  // 2. The local transaction: INSERT the orders whose half is stored (and mark the previous
  //    batch's committed ones sent).
  std::vector<NewOrder> stored;
  for (const auto& h : halves) stored.push_back({h.first, deadline, now});
  auto inserted = CommitLocal(db, std::move(stored), std::move(*committed));
  committed->clear();
  std::unordered_set<uint64_t> in_db;
  if (inserted.ok()) {
    in_db.insert(inserted->begin(), inserted->end());
  } else {
    std::fprintf(stderr, "order-timeout: %s\n", inserted.status().ToString().c_str());
    Bump(metrics_->db_errors);
  }
  // 3. End: COMMIT what the local transaction inserted, ROLLBACK the rest. A failed End is left
  //    to the check-back, which answers from SQLite.
  for (const auto& [id, tx] : halves) {
    const bool commit = in_db.count(id) != 0;
    absl::Status s = producer.EndTransaction(
        options_.topic, tx.receipt.message_id, tx.transaction_id,
        commit ? client::TransactionResolution::kCommit : client::TransactionResolution::kRollback);
    if (!s.ok()) {
      Bump(metrics_->tx_end_errors);
    } else if (commit) {
      Bump(metrics_->sent);
      committed->push_back(id);
    }
    if (commit) payer_->Schedule(id, deadline);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t id : ids) in_flight_.erase(id);
}

void TransactionalCreator::Loop(client::Producer* producer) {
  auto db = OrderDb::Open(options_.db_path, options_.sqlite, clock_);
  if (!db.ok()) {
    std::fprintf(stderr, "order-timeout: %s\n", db.status().ToString().c_str());
    metrics_->fatal = true;
    done_threads_.fetch_add(1);
    return;
  }
  const uint64_t n = config_.orders;
  // Small chunks per thread keep each order's half -> End short; the group commit keeps the
  // SQLite transactions large.
  const uint64_t batch =
      static_cast<uint64_t>(std::max(1, options_.batch / std::max(1, options_.window)));
  std::vector<uint64_t> committed;  // marked sent in the next local transaction
  while (!stop_ && !metrics_->fatal) {
    const uint64_t first = next_id_.fetch_add(batch);
    if (first >= n) break;
    const uint64_t end = std::min(n, first + batch);
    // --resume: an order that exists was created by an earlier process; its half (if not
    // ended) is resolved by the check-back.
    auto existing = (*db)->ExistingIds(first, end);
    if (!existing.ok()) {
      Bump(metrics_->db_errors);
      continue;
    }
    std::unordered_set<uint64_t> skip(existing->begin(), existing->end());
    std::vector<uint64_t> ids;
    for (uint64_t id = first; id < end; ++id) {
      if (skip.count(id) == 0) ids.push_back(id);
    }
    if (!ids.empty()) CreateBatch(*producer, **db, std::move(ids), &committed);
  }
  if (!(*db)->MarkSent(committed).ok()) Bump(metrics_->db_errors);
  done_threads_.fetch_add(1);
}

}  // namespace tokimq::order_timeout
