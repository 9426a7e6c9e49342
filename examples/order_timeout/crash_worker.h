// CrashWorker: the demo's kill -9 of a cancel worker between its SQLite COMMIT and its ACK.
//
// A forked child process runs one canceller: it receives timeout messages (lease
// `invisible_ms`, short, so the broker redelivers soon), applies them with HandleTimeouts (one
// SQLite transaction: cancel + processed message id) and, as soon as a committed transaction
// cancelled at least one order, reports what it holds through a pipe and kills itself with
// SIGKILL before ACKing anything of that batch. The broker redelivers those messages after the
// lease; the parent's cancellers must find their ids processed and only ACK them (the audit's
// "duplicates applied" stays 0). Batches without a cancel are ACKed normally. The child exits
// by itself (code 0, no report) after `give_up_ms` without a cancel.
//
// Start() must be called before this process starts any thread (fork copies only the calling
// thread); the child opens its own SQLite connection and broker connection.
// Thread-safety: one controlling thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "order_timeout/workers.h"

namespace tokimq::order_timeout {

struct CrashReport {
  bool exited = false;       // the child is gone (reaped)
  bool killed = false;       // by SIGKILL after a commit, as planned
  uint64_t applied = 0;      // orders its last transaction cancelled (committed, not ACKed)
  uint64_t held = 0;         // messages of that batch it never ACKed
  std::string how;           // how it ended, for the report
};

class CrashWorker {
 public:
  static absl::StatusOr<CrashWorker> Start(const JobOptions& options, int64_t invisible_ms,
                                           int64_t give_up_ms);
  CrashWorker(CrashWorker&& other) noexcept;
  CrashWorker& operator=(CrashWorker&&) = delete;
  ~CrashWorker();

  // Non-blocking; true once the child has exited (then `report()` is final).
  bool Poll();
  // SIGKILLs the child if it still runs, reaps it; returns the report.
  const CrashReport& Finish();
  const CrashReport& report() const { return report_; }

 private:
  CrashWorker(pid_t pid, int read_fd) : pid_(pid), read_fd_(read_fd) {}
  void Reaped(int wait_status);

  pid_t pid_ = -1;
  int read_fd_ = -1;
  CrashReport report_;
};

}  // namespace tokimq::order_timeout
