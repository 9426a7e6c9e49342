#include "order_timeout/crash_worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tokimq::order_timeout {
namespace {

// The child: never returns.
[[noreturn]] void RunChild(const JobOptions& options, int64_t invisible_ms, int64_t give_up_ms,
                           int write_fd) {
  Clock& clock = *SystemClock::Default();
  auto db = OrderDb::Open(options.db_path, options.sqlite, clock);
  if (!db.ok()) ::_exit(3);
  Metrics metrics;
  client::SimpleConsumer consumer(options.client, options.group);
  client::ReceiveOptions ro;
  ro.max_messages = options.receive_batch;
  ro.invisible_ms = invisible_ms;
  ro.long_poll_ms = 500;
  const int64_t give_up_at = clock.NowMs() + give_up_ms;
  while (clock.NowMs() < give_up_at) {
    auto received = consumer.Receive(options.topic, ro);
    if (!received.ok()) {
      clock.WaitUntilMs(clock.NowMs() + 200, std::chrono::milliseconds(200));
      continue;
    }
    BatchResult batch = HandleTimeouts(**db, consumer, *received, clock.NowMs(), &metrics, nullptr);
    if (batch.applied > 0) {
      char line[64];
      int n = std::snprintf(line, sizeof(line), "%" PRIu64 " %zu\n", batch.applied,
                            batch.ack.size());
      (void)!::write(write_fd, line, static_cast<size_t>(n));
      ::raise(SIGKILL);  // committed in SQLite, not ACKed
    }
    if (!batch.ack.empty()) (void)consumer.AckBatch(batch.ack);
  }
  ::_exit(0);
}

}  // namespace

absl::StatusOr<CrashWorker> CrashWorker::Start(const JobOptions& options, int64_t invisible_ms,
                                               int64_t give_up_ms) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("crash worker: pipe failed");
  std::fflush(nullptr);  // do not print the parent's buffered output twice
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError("crash worker: fork failed");
  }
  if (pid == 0) {
    ::close(fds[0]);
    // Die with the parent (a kill -9 of the demo must not leave this consumer running).
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() == 1) ::_exit(7);
    RunChild(options, invisible_ms, give_up_ms, fds[1]);
  }
  ::close(fds[1]);
  return CrashWorker(pid, fds[0]);
}

CrashWorker::CrashWorker(CrashWorker&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      read_fd_(std::exchange(other.read_fd_, -1)),
      report_(std::move(other.report_)) {}

CrashWorker::~CrashWorker() {
  Finish();
  if (read_fd_ >= 0) ::close(read_fd_);
}

void CrashWorker::Reaped(int wait_status) {
  pid_ = -1;
  report_.exited = true;
  char buf[64] = {};
  ssize_t n = ::read(read_fd_, buf, sizeof(buf) - 1);
  const bool reported = n > 0 && std::sscanf(buf, "%" SCNu64 " %" SCNu64, &report_.applied,
                                             &report_.held) == 2;
  if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL && reported) {
    report_.killed = true;
    report_.how = "kill -9 after its SQLite commit, before its ACK";
  } else if (WIFSIGNALED(wait_status)) {
    report_.how = absl::StrCat("killed by signal ", WTERMSIG(wait_status), " before any cancel");
  } else {
    report_.how = absl::StrCat("exited with code ", WEXITSTATUS(wait_status),
                               " without cancelling an order");
  }
}

bool CrashWorker::Poll() {
  if (pid_ < 0) return report_.exited;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) Reaped(status);
  return report_.exited;
}

const CrashReport& CrashWorker::Finish() {
  if (pid_ < 0) return report_;
  if (!Poll()) {
    ::kill(pid_, SIGKILL);  // our own child, by pid
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) Reaped(status);
  }
  return report_;
}

}  // namespace tokimq::order_timeout
