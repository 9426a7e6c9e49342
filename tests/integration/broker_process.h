// BrokerProcess: runs the real tokimq-broker binary (path from the TOKIMQ_BROKER_BIN compile
// definition) on a free port (--port 0 + --port-file) and a data dir, for black-box tests.
// Waiting for the broker to come up polls the port file (support/await.h, bounded: 10 s):
// integration tests wait on a real process, which unit tests never do. Fixture with etcd and
// several brokers: support/cluster_processes.h.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "client/admin.h"
#include "client/connection.h"
#include "support/await.h"

namespace tokimq::testing {

class BrokerProcess {
 public:
  // `data_dir` persists across Start/Stop so restarts can be tested.
  BrokerProcess(std::string data_dir, std::vector<std::string> extra_args = {"--manual-clock"})
      : data_dir_(std::move(data_dir)), extra_args_(std::move(extra_args)) {}
  ~BrokerProcess() { Kill(); }

  // Starts the broker and waits until it listens. False if it exited or did not come up.
  bool Start() {
    std::string port_file = data_dir_ + ".port";
    ::unlink(port_file.c_str());
    // TOKIMQ_TEST_BROKER_BIN (environment) runs another build's broker, e.g. main's for a
    // before/after figure (tests/integration/follower_timer_test.cc).
    const char* bin = std::getenv("TOKIMQ_TEST_BROKER_BIN");
    std::vector<std::string> args = {bin != nullptr && *bin != 0 ? bin : TOKIMQ_BROKER_BIN,
                                     "--data-dir", data_dir_, "--port",
                                     std::to_string(fixed_port_),
                                     "--port-file", port_file, "--log-file", data_dir_ + ".log"};
    // The HTTP port off unless the test asks for one: several brokers run at once and the
    // default (9464) is one port for all.
    if (std::find(extra_args_.begin(), extra_args_.end(), "--http-port") == extra_args_.end()) {
      args.insert(args.end(), {"--http-port", "0"});
    }
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    // Built before the fork: in the child of a multi-threaded test (load threads, clients) only
    // async-signal-safe calls are safe until exec; an allocation can deadlock on an allocator
    // lock another thread held at the fork (tools/crashloop hung so once under ASan).
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (nofile_limit_ > 0) {  // as `ulimit -n`: soft and hard
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(nofile_limit_);
        if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(126);
      }
      if (!netns_.empty()) {  // as `ip netns exec`: the broker's sockets live in that namespace
        const int ns = ::open(netns_.c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(125);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    bool exited = false;
    const bool ended = AwaitTrue(
        [&] {
          std::ifstream in(port_file);
          int port = 0;
          if (in >> port && port > 0) {
            port_ = port;
            return true;
          }
          int status = 0;
          exited = ::waitpid(pid_, &status, WNOHANG) == pid_;
          return exited;
        },
        std::chrono::seconds(10), "the broker's port file", std::chrono::milliseconds(20));
    if (exited) pid_ = -1;
    return ended && !exited;
  }

  // SIGTERM and wait; returns the exit status (0 = clean shutdown).
  int Stop() { return SignalAndWait(SIGTERM); }
  // SIGKILL and wait (a crash).
  void Kill() { SignalAndWait(SIGKILL); }

  client::ClientOptions Options() const {
    client::ClientOptions o;
    o.broker = host_ + ":" + std::to_string(port_);
    o.request_timeout_ms = 15'000;
    if (!client_tls_ca_.empty()) {
      o.tls = true;
      o.tls_ca_file = client_tls_ca_;
    }
    return o;
  }
  // Options() connects with TLS trusting the PEM CA file `ca_file` ("" = plaintext, the
  // default): for a broker started with --tls-mode enforcing.
  void set_client_tls(std::string ca_file) { client_tls_ca_ = std::move(ca_file); }
  int port() const { return port_; }
  // Listen on this port from the next Start (0: a free one, the default): a restart on the
  // address clients and peers already know.
  void set_fixed_port(int port) { fixed_port_ = port; }
  // Run the broker in the network namespace at `path` (/var/run/netns/<name>) from the next
  // Start; "" = the test's own. Clients then reach it at `host` (Options()), the address it
  // binds (pass --bind host in the args). Needs CAP_SYS_ADMIN (failover/netns.h makes them).
  void set_netns(std::string path, std::string host) {
    netns_ = std::move(path);
    host_ = std::move(host);
  }
  // RLIMIT_NOFILE (soft and hard) of the broker from the next Start; 0 = inherited.
  void set_nofile_limit(uint64_t n) { nofile_limit_ = n; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

 private:
  int SignalAndWait(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string data_dir_;
  std::string log_path_ = data_dir_ + ".log";
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
  int port_ = 0;
  int fixed_port_ = 0;
  uint64_t nofile_limit_ = 0;
  std::string netns_;
  std::string host_ = "127.0.0.1";
  std::string client_tls_ca_;
};

// Creates topic `name` of `type` with `queues` queues on `broker` (AdminClient::CreateTopic, no
// placement: a single broker). The first step of most single-broker integration tests.
inline absl::Status CreateTopic(const BrokerProcess& broker, const std::string& name,
                                proto::TopicType type, int queues) {
  proto::TopicConfig t;
  t.set_name(name);
  t.set_type(type);
  t.set_queues(queues);
  return client::AdminClient(broker.Options()).CreateTopic(t).status();
}

// Waits (bounded real time, 30 s) until the broker's timer store has linked every timer-topic
// message sent so far into its wheel (enqueue lag 0). Tests that jump the manual clock right
// after sending call it so the jump does not race the broker's enqueue thread.
inline absl::Status AwaitTimerEnqueued(client::AdminClient& admin) {
  absl::StatusOr<proto::StatsResponse> st;
  const bool lag_zero = AwaitTrue(
      [&] {
        st = admin.Stats();
        return !st.ok() || st->timer().enqueue_lag() == 0;
      },
      std::chrono::seconds(30), "enqueue lag 0");
  if (!st.ok()) return st.status();
  if (lag_zero) return absl::OkStatus();
  return absl::DeadlineExceededError("timer enqueue stuck: enqueue_lag=" +
                                     std::to_string(st->timer().enqueue_lag()));
}

}  // namespace tokimq::testing
