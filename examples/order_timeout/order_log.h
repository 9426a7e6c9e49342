// OrderLog: the order-timeout example's durable store, an append-only file of order state
// changes (docs/formats/order-log.md): a 56-byte header with the run's configuration, then
// fixed 24-byte records {crc32c, event, order id, time}, each with its own CRC32C.
//
// Appending and syncing are split so that many threads can share one fdatasync (group commit):
// Append() only buffers a record in memory and returns its sequence number; Sync(seq) returns once
// every record up to `seq` is written and fdatasync'ed. "Appended" therefore means "will be
// written by the next Sync", "durable" means "a Sync covering it returned OK". After a failed
// write or fsync the log stays failed: every later Sync returns that error.
//
// Recovery (Open): records are replayed in file order. A torn tail (a partial record, or bad
// records up to the end of the file) is truncated; a bad record followed by a good one is
// corruption (kDataLoss naming the file and offset).
//
// Thread-safety: Append, Sync, durable_seq and sync_count may be called from any thread. Open,
// Create and Scan are static and run before any concurrency.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file.h"

namespace tokimq::order_timeout {

// Persisted values: never renumber.
enum class OrderEvent : uint8_t {
  kCreated = 1,    // time_ms = the order's payment deadline (deliver time of its timeout message)
  kSent = 2,       // the timeout message was accepted by the broker; time_ms = when
  kPaid = 3,       // time_ms = when the payment was recorded
  kCancelled = 4,  // time_ms = when the canceller cancelled it
};

struct OrderRecord {
  OrderEvent event = OrderEvent::kCreated;
  uint64_t order_id = 0;
  int64_t time_ms = 0;
};

// What a run is: fixed when the log is created, read back by --resume.
struct RunConfig {
  uint64_t run_id = 0;
  uint64_t orders = 0;
  int64_t timeout_ms = 0;
  uint32_t paid_ppm = 0;  // share of orders that pay, parts per million
  uint64_t seed = 0;      // payment plan seed
};

inline constexpr size_t kOrderLogHeaderSize = 56;
inline constexpr size_t kOrderLogRecordSize = 24;

class OrderLog {
 public:
  using ReplayFn = std::function<void(const OrderRecord&)>;

  // Creates `path` (kAlreadyExists if it exists) with a durable header.
  static absl::StatusOr<std::unique_ptr<OrderLog>> Create(FileSystem* fs, const std::string& path,
                                                          const RunConfig& config);
  // Opens an existing log, replays its records into `replay`, truncates a torn tail.
  // kNotFound if missing, kDataLoss on a bad header or mid-file corruption.
  static absl::StatusOr<std::unique_ptr<OrderLog>> Open(FileSystem* fs, const std::string& path,
                                                        const ReplayFn& replay);
  // Reads a log without changing it (the end-of-run audit). Stops at the first bad record.
  static absl::StatusOr<RunConfig> Scan(FileSystem* fs, const std::string& path,
                                        const ReplayFn& replay);

  ~OrderLog();
  OrderLog(const OrderLog&) = delete;
  OrderLog& operator=(const OrderLog&) = delete;

  const RunConfig& config() const { return config_; }

  // Buffers `rec`; returns its sequence number (1, 2, ...). Never blocks on I/O.
  uint64_t Append(const OrderRecord& rec);
  // Makes every record with sequence <= seq durable. Concurrent callers share one write+fsync.
  absl::Status Sync(uint64_t seq);
  // Sync of everything appended so far.
  absl::Status SyncAll();

  uint64_t durable_seq() const;
  uint64_t sync_count() const;

  // Encoding helpers (also used by the format tests).
  static std::string EncodeHeader(const RunConfig& config);
  static std::string EncodeRecord(const OrderRecord& rec);

 private:
  OrderLog(std::unique_ptr<File> file, RunConfig config, uint64_t records);

  std::unique_ptr<File> file_;
  const RunConfig config_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;          // encoded records not yet handed to a writer
  uint64_t appended_seq_ = 0;   // last sequence handed out
  uint64_t durable_seq_ = 0;    // last sequence known durable
  bool writing_ = false;        // one thread at a time writes + syncs
  absl::Status failed_;         // sticky write/sync error
  uint64_t sync_count_ = 0;
};

}  // namespace tokimq::order_timeout
