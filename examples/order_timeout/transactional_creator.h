// TransactionalCreator: creates the run's orders the way issue 16 asks (RocketMQ 5's
// transactional messages, docs/transactions.md): for each order, a transactional send of its
// timeout message (a half message: durable, invisible) -> the INSERT of the order in SQLite as
// the local transaction (one transaction per batch of orders) -> EndTransaction COMMIT (or
// ROLLBACK for an order the local transaction did not insert). The broker hands the committed
// message to the timer store (deliver time = the order's deadline).
//
// Its checker answers the broker's check-backs from SQLite: the order row exists -> COMMIT,
// else ROLLBACK; kUnknown while this process is itself between the half and its End for that
// order (its local transaction may still commit), or for another run's message. So when a
// creator dies mid-transaction (or an End reply is lost), an order exists iff its timeout
// message is committed.
//
// Threads: options.producers Producer connections, options.window creation threads each
// (sync calls pipelined on the shared connection; each thread takes batch / window orders at a
// time, and their local transactions are group-committed), plus one Producer whose check-back
// thread runs the checker with its own SQLite connection. Ownership: borrows the payer, Clock and
// Metrics. Thread-safety: Start/Stop/done from one controlling thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "client/producer.h"
#include "order_timeout/workers.h"

namespace tokimq::order_timeout {

class TransactionalCreator {
 public:
  TransactionalCreator(JobOptions options, RunConfig config, PaymentSimulator* payer, Clock& clock,
                       Metrics* metrics);
  ~TransactionalCreator();

  // Registers the checker, then creates every order (ids < config.orders) not yet in SQLite.
  void Start();
  bool done() const { return done_threads_.load() == threads_.size(); }
  void Stop();  // makes retries give up; the checker keeps answering until destruction

  // The check-back answer for one half message (public for tests).
  client::TransactionResolution Check(const client::TransactionCheck& check);

 private:
  void Loop(client::Producer* producer);
  void CreateBatch(client::Producer& producer, OrderDb& db, std::vector<uint64_t> ids,
                   std::vector<uint64_t>* committed);
  // The local transaction, group-committed: the calling thread's orders (and sent marks) join
  // whatever other creation threads handed in meanwhile, in one SQLite transaction run by one of
  // them on its own connection. Returns the calling thread's ids that were inserted.
  struct CommitRequest;
  absl::StatusOr<std::vector<uint64_t>> CommitLocal(OrderDb& db, std::vector<NewOrder> orders,
                                                    std::vector<uint64_t> sent);

  JobOptions options_;
  const RunConfig config_;
  PaymentSimulator* payer_;
  Clock& clock_;
  Metrics* metrics_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> stop_{false};
  std::atomic<size_t> done_threads_{0};

  std::mutex mu_;                           // guards in_flight_ and check_db_
  std::unordered_set<uint64_t> in_flight_;  // orders between their half and their End here
  std::unique_ptr<OrderDb> check_db_;       // the checker's connection, opened on first use

  std::mutex commit_mu_;  // guards commit_queue_, committing_, CommitRequest::done
  std::condition_variable commit_cv_;
  std::vector<CommitRequest*> commit_queue_;
  bool committing_ = false;

  std::unique_ptr<client::Producer> checker_producer_;
  std::vector<std::unique_ptr<client::Producer>> producers_;
  std::vector<std::thread> threads_;
};

}  // namespace tokimq::order_timeout
