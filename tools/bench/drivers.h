// The three systems tokimq-bench drives with the same workload, behind one small interface:
//  - tokimq: Producer::SendBatchAsync (a window of batches in flight) to a DELAY topic;
//    SimpleConsumer Receive + AckBatch.
//  - redis: the usual sorted-set delay queue. ZADD <prefix>:delayed <deliver ms> <member>
//    (one variadic ZADD per batch); a mover thread runs a Lua script that atomically moves due
//    members to the <prefix>:ready list; consumers pop with a Lua script that leases what it pops
//    (ZADD <prefix>:inflight <lease deadline>) and ACK with ZREM <prefix>:inflight.
//  - beanstalkd: put with a delay in whole seconds (rounded up: never early), reserve, delete.
//  - postgresql: a jobs table claimed with FOR UPDATE SKIP LOCKED, the lease a locked_until
//    column, ACK a DELETE (pg_driver.cc has the schema and statements).
// Every message body starts with "<deliver ms>:<seq>:" so lateness is measured the same way.
//
// Thread-safety: a Driver is shared by all threads (Start/Stop from one); a Producer or Consumer
// session belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace tokimq::bench {

struct BenchMessage {
  int64_t deliver_ms = 0;  // absolute, ms since epoch; <= now: immediately available
  std::string body;
};

struct Received {
  int64_t deliver_ms = 0;  // parsed from the body
  uint64_t seq = 0;
  std::string handle;      // receipt handle / member / job id
};

class ProducerSession {
 public:
  virtual ~ProducerSession() = default;
  // Sends a batch; may return before the broker answered (pipelining). Errors of earlier
  // batches surface here or in Flush.
  virtual absl::Status Send(std::vector<BenchMessage> batch) = 0;
  // Waits for every outstanding batch.
  virtual absl::Status Flush() = 0;
};

class ConsumerSession {
 public:
  virtual ~ConsumerSession() = default;
  // Up to max messages, waiting up to wait_ms for the first one. Empty: none ready.
  virtual absl::StatusOr<std::vector<Received>> Receive(int max, int64_t wait_ms) = 0;
  virtual absl::Status Ack(const std::vector<Received>& msgs) = 0;
  // Acks `acks` (the last batch) and receives the next, in as few round trips as the system
  // allows: tokimq carries the acks in the receive (ReceiveRequest.ack_receipt_handles), Redis
  // pipelines its ZREM with the pop script, PostgreSQL runs the DELETE and the claim in one
  // statement. This default makes two round trips (Ack, then Receive).
  virtual absl::StatusOr<std::vector<Received>> AckAndReceive(const std::vector<Received>& acks,
                                                              int max, int64_t wait_ms) {
    if (absl::Status s = Ack(acks); !s.ok()) return s;
    return Receive(max, wait_ms);
  }
};

// The broker's own view of its timer releases (tokimq only): what the dequeue service has put
// into the queue's topic, as opposed to what consumers received.
struct ReleaseSnapshot {
  int64_t taken_ms = 0;        // bench clock when the answer arrived
  int64_t topic_messages = 0;  // messages ever put into the queue's topic (sum of max offsets)
  HistogramSnapshot lateness;  // release lateness (put time - deliver time, ms), since start
};

struct DriverOptions {
  std::string system;       // tokimq | redis | beanstalkd | postgresql
  std::string addr;         // host:port
  std::string queue;        // topic / key prefix / tube / table suffix
  int pipeline = 16;        // batches in flight per producer (tokimq, redis, postgresql)
  int64_t lease_ms = 60'000;
  // tokimq with --auth (docs/security.md): credentials of a user allowed on the bench topic.
  std::string access_key;
  std::string secret_key;
  bool tls = false;          // tokimq with --tls-cert: connect with TLS
  std::string tls_ca_file;
};

class Driver {
 public:
  virtual ~Driver() = default;
  // Creates or empties the queue; starts helper threads (the Redis mover).
  virtual absl::Status Setup() = 0;
  virtual void Stop() {}
  virtual absl::StatusOr<std::unique_ptr<ProducerSession>> NewProducer() = 0;
  virtual absl::StatusOr<std::unique_ptr<ConsumerSession>> NewConsumer() = 0;
  // One cheap request: OK when the system serves (used to time restarts).
  virtual absl::Status Ping() = 0;
  // The broker's timer release figures, cumulative since it started. kUnimplemented for systems
  // without a release moment separate from the consumer's receive (redis, beanstalkd). One
  // thread at a time.
  virtual absl::StatusOr<ReleaseSnapshot> SnapshotRelease() {
    return absl::UnimplementedError("no broker-side release figures");
  }
  // fsync/fdatasync calls of the system's log since it started, counted by the system itself
  // (tokimq: Stats commitlog_syncs, its CommitLog segment fdatasyncs). kUnimplemented for
  // systems that do not count them (redis, beanstalkd: bench/compare.sh counts with strace).
  virtual absl::StatusOr<int64_t> LogSyncs() {
    return absl::UnimplementedError("the system does not count its fsyncs");
  }
};

absl::StatusOr<std::unique_ptr<Driver>> NewTokimqDriver(const DriverOptions& o);
absl::StatusOr<std::unique_ptr<Driver>> NewRedisDriver(const DriverOptions& o);
absl::StatusOr<std::unique_ptr<Driver>> NewBeanstalkDriver(const DriverOptions& o);
absl::StatusOr<std::unique_ptr<Driver>> NewPostgresDriver(const DriverOptions& o);

// "<deliver ms>:<seq>:" followed by filler up to body_size bytes.
std::string MakeBody(int64_t deliver_ms, uint64_t seq, size_t body_size);
bool ParseBody(std::string_view body, int64_t* deliver_ms, uint64_t* seq);

}  // namespace tokimq::bench
