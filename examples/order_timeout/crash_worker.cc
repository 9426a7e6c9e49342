#include "order_timeout/crash_worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/producer.h"

namespace tokimq::order_timeout {
namespace {

[[noreturn]] void Report(int write_fd, uint64_t a, uint64_t b) {
  char line[64];
  int n = std::snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 "\n", a, b);
  (void)!::write(write_fd, line, static_cast<size_t>(n));
  ::raise(SIGKILL);
  ::_exit(8);
}

// The cancel worker child: never returns.
[[noreturn]] void RunCancelChild(const JobOptions& options, int64_t invisible_ms,
                                 int64_t give_up_ms, int write_fd) {
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
    if (batch.applied > 0) Report(write_fd, batch.applied, batch.ack.size());  // not ACKed
    if (!batch.ack.empty()) (void)consumer.AckBatch(batch.ack);
  }
  ::_exit(0);
}

// The creator child: per order its half, then (first half of the orders) its local
// transaction; after the last one SIGKILL, before any EndTransaction. Each local commit follows
// its half within milliseconds normally, inside the 3 s check immunity: a check-back can only find
// a local transaction that is over (the rule a checker relies on: immunity > the local
// transaction's duration; a shorter one makes the checker roll back orders that then exist).
[[noreturn]] void RunCreateChild(const JobOptions& options, const RunConfig& config,
                                 uint64_t first_id, uint64_t count, int write_fd) {
  Clock& clock = *SystemClock::Default();
  auto db = OrderDb::Open(options.db_path, options.sqlite, clock);
  if (!db.ok()) ::_exit(3);
  client::Producer producer(options.client);
  const int64_t now = clock.NowMs();
  const int64_t deadline = now + config.timeout_ms;
  uint64_t halves = 0, rows = 0;
  for (uint64_t id = first_id; id < first_id + count; ++id) {
    client::OutgoingMessage m = TimeoutMessage(options, config.run_id, id, deadline);
    m.properties.emplace("CHECK_IMMUNITY_TIME_IN_SECONDS", "3");  // checked back 3 s after send
    bool stored = false;
    for (int attempt = 0; attempt < 20 && !stored; ++attempt) {
      stored = producer.SendTransactional(m).ok();
      if (!stored) clock.WaitUntilMs(clock.NowMs() + 200, std::chrono::milliseconds(200));
    }
    if (!stored) continue;
    ++halves;
    if (id < first_id + count / 2) {
      auto inserted = (*db)->CreateOrders({id}, deadline, now);
      if (!inserted.ok()) ::_exit(4);
      rows += inserted->size();
    }
  }
  Report(write_fd, halves, rows);  // no EndTransaction for any of them
}

}  // namespace

absl::StatusOr<CrashWorker> CrashWorker::StartCanceller(const JobOptions& options,
                                                        int64_t invisible_ms, int64_t give_up_ms) {
  return Fork([&](int fd) { RunCancelChild(options, invisible_ms, give_up_ms, fd); },
              "kill -9 after its SQLite commit, before its ACK");
}

absl::StatusOr<CrashWorker> CrashWorker::StartCreator(const JobOptions& options,
                                                      const RunConfig& config, uint64_t first_id,
                                                      uint64_t count) {
  return Fork([&](int fd) { RunCreateChild(options, config, first_id, count, fd); },
              "kill -9 mid-transaction, after the halves and the local commit, before any End");
}

absl::StatusOr<CrashWorker> CrashWorker::Fork(const std::function<void(int)>& child,
                                              std::string planned) {
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
    child(fds[1]);
    ::_exit(9);
  }
  ::close(fds[1]);
  return CrashWorker(pid, fds[0], std::move(planned));
}

CrashWorker::CrashWorker(CrashWorker&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      read_fd_(std::exchange(other.read_fd_, -1)),
      planned_(std::move(other.planned_)),
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
  const bool reported =
      n > 0 && std::sscanf(buf, "%" SCNu64 " %" SCNu64, &report_.applied, &report_.held) == 2;
  if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL && reported) {
    report_.killed = true;
    report_.how = planned_;
  } else if (WIFSIGNALED(wait_status)) {
    report_.how =
        absl::StrCat("killed by signal ", WTERMSIG(wait_status), " before its planned kill");
  } else {
    report_.how =
        absl::StrCat("exited with code ", WEXITSTATUS(wait_status), " before its planned kill");
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
