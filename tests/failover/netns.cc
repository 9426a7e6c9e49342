#include "failover/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "support/run_command.h"

namespace tokimq::testing {
namespace {

// Runs one shell command line; its output goes into the error.
absl::Status Run(const std::string& command) {
  CommandResult r = RunShell(command + " 2>&1");
  if (r.exit_code == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      fmt::format("`{}` exited {}: {}", command, r.exit_code, r.out));
}

}  // namespace

absl::StatusOr<std::unique_ptr<NamespaceNetwork>> NamespaceNetwork::Create(int members) {
  if (members < 1 || members > 50) {
    return absl::InvalidArgumentError(fmt::format("{} members: 1..50", members));
  }
  std::unique_ptr<NamespaceNetwork> n(new NamespaceNetwork());
  const int pid = static_cast<int>(::getpid());
  n->tag_ = std::to_string(pid);
  n->prefix_ = fmt::format("10.{}.{}.", 200 + (pid >> 8) % 50, pid % 256);
  n->hub_ = n->prefix_ + "1";
  n->bridge_ = "tkb" + n->tag_;
  n->members_ = members;
  n->Teardown();  // leftovers of an earlier process with this pid (killed before its cleanup)
  absl::Status s = Run(fmt::format("ip link add {0} type bridge && ip addr add {1}/24 dev {0} && "
                                   "ip link set {0} up",
                                   n->bridge_, n->hub_));
  for (int i = 0; s.ok() && i < members; ++i) {
    const std::string ns = n->Namespace(i);
    s = Run(fmt::format(
        "ip netns add {0} && ip link add {1} type veth peer name eth0 netns {0} && "
        "ip link set {1} master {2} up && ip -n {0} addr add {3}/24 dev eth0 && "
        "ip -n {0} link set eth0 up && ip -n {0} link set lo up",
        ns, n->Veth(i), n->bridge_, n->address(i)));
  }
  if (!s.ok()) return s;  // the destructor removes what was made
  return n;
}

NamespaceNetwork::~NamespaceNetwork() { Teardown(); }

void NamespaceNetwork::Teardown() {
  // Deleting a namespace deletes its end of each veth pair, and so the pair.
  for (int i = 0; i < members_; ++i) {
    (void)RunShell(fmt::format("ip netns del {} >/dev/null 2>&1", Namespace(i)));
    (void)RunShell(fmt::format("ip link del {} >/dev/null 2>&1", Veth(i)));
  }
  (void)RunShell(fmt::format("ip link del {} >/dev/null 2>&1", bridge_));
}

std::string NamespaceNetwork::address(int i) const { return prefix_ + std::to_string(10 + i); }
std::string NamespaceNetwork::path(int i) const { return "/var/run/netns/" + Namespace(i); }
std::string NamespaceNetwork::Namespace(int i) const { return fmt::format("tkf{}n{}", tag_, i); }
std::string NamespaceNetwork::Veth(int i) const { return fmt::format("tkv{}n{}", tag_, i); }

absl::Status NamespaceNetwork::Cut(int i) { return Run(fmt::format("ip link set {} down", Veth(i))); }
absl::Status NamespaceNetwork::Heal(int i) { return Run(fmt::format("ip link set {} up", Veth(i))); }

absl::Status NamespaceNetwork::EnterNamespace(int i) const {
  const int fd = ::open(path(i).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(fmt::format("open {}: {}", path(i), std::strerror(errno)));
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return absl::InternalError(fmt::format("setns {}: {}", path(i), std::strerror(err)));
  return absl::OkStatus();
}

}  // namespace tokimq::testing
