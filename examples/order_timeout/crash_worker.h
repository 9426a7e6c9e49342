// CrashWorker: the demo's kill -9 of a worker process at the worst moment. Two kinds:
//
// StartCanceller: a cancel worker killed between its SQLite COMMIT and its ACK.
// A forked child process runs one canceller: it receives timeout messages (lease
// `invisible_ms`, short, so the broker redelivers soon), applies them with HandleTimeouts (one
// SQLite transaction: cancel + processed message id) and, as soon as a committed transaction
// cancelled at least one order, reports what it holds through a pipe and kills itself with
// SIGKILL before ACKing anything of that batch. The broker redelivers those messages after the
// lease; the parent's cancellers must find their ids processed and only ACK them (the audit's
// "duplicates applied" stays 0). Batches without a cancel are ACKed normally. The child exits
// by itself (code 0, no report) after `give_up_ms` without a cancel.
//
// StartCreator: an order creator killed mid-transaction. For the extra order ids
// [first_id, first_id + count) it sends each one's transactional timeout message (a half
// message, check immunity 3 s) and, for the first half of those orders, right after it the
// local transaction (the INSERT commits); then it reports and kills itself with SIGKILL before
// any EndTransaction. The
// broker's check-back then asks the parent's checker, which answers from SQLite: the inserted
// orders' messages are committed (and later cancel them), the others are rolled back.
//
// Start() must be called before this process starts any thread (fork copies only the calling
// thread); the child opens its own SQLite connection and broker connection.
// Thread-safety: one controlling thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "order_timeout/workers.h"

namespace tokimq::order_timeout {

struct CrashReport {
  bool exited = false;  // the child is gone (reaped)
  bool killed = false;  // by SIGKILL at the planned moment
  // Canceller: orders its last transaction cancelled (committed, not ACKed) and messages of
  // that batch it never ACKed. Creator: halves sent and orders inserted (no End for any).
  uint64_t applied = 0;
  uint64_t held = 0;
  std::string how;  // how it ended, for the report
};

class CrashWorker {
 public:
  static absl::StatusOr<CrashWorker> StartCanceller(const JobOptions& options, int64_t invisible_ms,
                                                    int64_t give_up_ms);
  static absl::StatusOr<CrashWorker> StartCreator(const JobOptions& options,
                                                  const RunConfig& config, uint64_t first_id,
                                                  uint64_t count);
  CrashWorker(CrashWorker&& other) noexcept;
  CrashWorker& operator=(CrashWorker&&) = delete;
  ~CrashWorker();

  // Non-blocking; true once the child has exited (then `report()` is final).
  bool Poll();
  // SIGKILLs the child if it still runs, reaps it; returns the report.
  const CrashReport& Finish();
  const CrashReport& report() const { return report_; }

 private:
  CrashWorker(pid_t pid, int read_fd, std::string planned)
      : pid_(pid), read_fd_(read_fd), planned_(std::move(planned)) {}
  // Forks; the child runs `child(write_fd)`, which must not return.
  static absl::StatusOr<CrashWorker> Fork(const std::function<void(int)>& child,
                                          std::string planned);
  void Reaped(int wait_status);

  pid_t pid_ = -1;
  int read_fd_ = -1;
  std::string planned_;  // the planned kill, for the report
  CrashReport report_;
};

}  // namespace tokimq::order_timeout
