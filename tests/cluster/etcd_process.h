// EtcdProcess: runs a real etcd (Debian's etcd-server, `etcd` on PATH or TOKIMQ_ETCD_BIN) on two
// free loopback ports and a data dir, for tests of the cluster component and the cluster
// integration tests. Start waits (bounded real time, 20 s) until etcd answers a read through
// EtcdClient. The data dir persists across Stop/Start (an etcd restart keeps its keys and
// leases, as a real one would).
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cluster/etcd_client.h"

namespace tokimq::testing {

// A port that was free a moment ago (bind to 0, read, close).
inline int PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

inline bool PortAccepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

class EtcdProcess {
 public:
  explicit EtcdProcess(std::string data_dir)
      : data_dir_(std::move(data_dir)), client_port_(PickFreePort()), peer_port_(PickFreePort()) {}
  ~EtcdProcess() { Kill(); }

  bool Start() {
    const char* bin = std::getenv("TOKIMQ_ETCD_BIN");
    const std::string client_url = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port_);
    std::vector<std::string> args = {bin ? bin : "etcd",
                                     "--name", "tokimq-test",
                                     "--data-dir", data_dir_,
                                     "--listen-client-urls", client_url,
                                     "--advertise-client-urls", client_url,
                                     "--listen-peer-urls", peer_url,
                                     "--initial-advertise-peer-urls", peer_url,
                                     "--initial-cluster", "tokimq-test=" + peer_url,
                                     "--logger", "zap", "--log-outputs", data_dir_ + ".log"};
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    // First the TCP port (a gRPC channel that failed to connect backs off for seconds).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!PortAccepts(client_port_)) {
      int status = 0;
      if (std::chrono::steady_clock::now() > deadline || ::waitpid(pid_, &status, WNOHANG) == pid_) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto client = cluster::EtcdClient::Create({{endpoint()}, 2'000});
    if (!client.ok()) return false;
    absl::Status last;
    while (std::chrono::steady_clock::now() < deadline) {
      last = (*client)->Get("/probe").status();
      if (last.ok()) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::fprintf(stderr, "etcd at %s did not answer: %s\n", endpoint().c_str(),
                 last.ToString().c_str());
    return false;
  }
  void Stop() { SignalAndWait(SIGTERM); }
  void Kill() { SignalAndWait(SIGKILL); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  bool running() const { return pid_ > 0; }

 private:
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
  pid_t pid_ = -1;
};

}  // namespace tokimq::testing
