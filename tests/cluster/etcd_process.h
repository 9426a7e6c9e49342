// EtcdProcess: runs a real etcd (Debian's etcd-server, `etcd` on PATH or TOKIMQ_ETCD_BIN) on two
// free loopback ports and a data dir, for tests of the cluster component and the cluster
// integration tests. Start waits (support/await.h, bounded real time, 20 s) until etcd answers
// a read through EtcdClient. The data dir persists across Stop/Start (an etcd restart keeps its
// keys and leases, as a real one would). Fixtures: support/etcd_test.h (etcd + a client) and
// support/cluster_test.h (etcd + tokimq-broker processes).
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "support/await.h"
#include "support/ports.h"

namespace tokimq::testing {

class EtcdProcess {
 public:
  explicit EtcdProcess(std::string data_dir)
      : data_dir_(std::move(data_dir)), client_port_(PickFreePort()), peer_port_(PickFreePort()) {}
  ~EtcdProcess() { Kill(); }

  bool Start() {
    const char* bin = std::getenv("TOKIMQ_ETCD_BIN");
    const std::string client_url = "http://127.0.0.1:" + std::to_string(client_port_);
    // Also on the extra host (listened to and advertised): clients in other network namespaces.
    const std::string listen_urls =
        extra_host_.empty()
            ? client_url
            : client_url + ",http://" + extra_host_ + ":" + std::to_string(client_port_);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port_);
    std::vector<std::string> args = {bin ? bin : "etcd",
                                     "--name", "tokimq-test",
                                     "--data-dir", data_dir_,
                                     "--listen-client-urls", listen_urls,
                                     "--advertise-client-urls", "http://" + endpoint(),
                                     "--listen-peer-urls", peer_url,
                                     "--initial-advertise-peer-urls", peer_url,
                                     "--initial-cluster", "tokimq-test=" + peer_url,
                                     "--logger", "zap", "--log-outputs", data_dir_ + ".log"};
    // Built before the fork: in the child of a multi-threaded test (load threads, clients) only
    // async-signal-safe calls are safe until exec; an allocation can deadlock on an allocator
    // lock another thread held at the fork (tools/crashloop hung so once under ASan).
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    // First the TCP port (a gRPC channel that failed to connect backs off for seconds), then a
    // read through EtcdClient; either wait ends early when etcd exited.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto left = [&] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
    };
    bool exited = false;
    auto exited_now = [&] {
      int status = 0;
      exited = exited || ::waitpid(pid_, &status, WNOHANG) == pid_;
      return exited;
    };
    if (!AwaitTrue([&] { return PortAccepts(client_port_) || exited_now(); }, left(),
                   "etcd's client port") ||
        exited) {
      return Exited(exited);
    }
    auto client = cluster::EtcdClient::Create({{endpoint()}, 2'000});
    if (!client.ok()) return false;
    absl::Status last;
    const auto answered = AwaitTrue(
        [&] {
          last = (*client)->Get("/probe").status();
          return last.ok() || exited_now();
        },
        left(), "etcd to answer a read", std::chrono::milliseconds(50));
    if (answered && !exited) return true;
    std::fprintf(stderr, "etcd at %s did not answer: %s\n", endpoint().c_str(),
                 last.ToString().c_str());
    return Exited(exited);
  }
  void Stop() { SignalAndWait(SIGTERM); }
  void Kill() { SignalAndWait(SIGKILL); }
  // host:port for clients: the extra host when one is set, else loopback.
  std::string endpoint() const {
    return (extra_host_.empty() ? "127.0.0.1" : extra_host_) + ":" + std::to_string(client_port_);
  }
  // From the next Start, listen on `host` too (an address of this namespace, e.g. a bridge that
  // brokers in their own network namespaces reach) and make endpoint() name it.
  void set_extra_host(std::string host) { extra_host_ = std::move(host); }
  bool running() const { return pid_ > 0; }

 private:
  // After a failed start: forget the pid of an etcd that exited (reaped), keep a running one for
  // Kill. Always false.
  bool Exited(bool exited) {
    if (exited) pid_ = -1;
    return false;
  }
  void SignalAndWait(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  std::string data_dir_;
  int client_port_;
  int peer_port_;
  std::string extra_host_;
  pid_t pid_ = -1;
};

}  // namespace tokimq::testing
