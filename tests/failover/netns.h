// NamespaceNetwork: a small network of Linux network namespaces made by a fault test, so that one
// broker can be cut off from the others and from etcd (issue 20 item 7, "a leader isolated from
// its followers and etcd") while every process stays alive.
//
// Shape: one bridge in the test's own namespace holding the hub address 10.A.B.1/24 (etcd listens
// there), and per member i a namespace with `lo` and an `eth0` at 10.A.B.(10+i)/24, the other end
// of a veth pair whose near end is a port of the bridge. Cut(i) sets that near end down: member i
// then reaches nobody but itself (its own address and loopback still work, so a client that
// entered its namespace still talks to it) and nobody reaches it; Heal(i) sets it up again.
// A.B and every name (bridge tkb<pid>, namespaces tkf<pid>n<i>, veths tkv<pid>n<i>) come from
// the test process id, so parallel test processes do not collide.
//
// Lifetime: the destructor deletes the namespaces (their veth pairs go with them) and the bridge,
// also when the test failed (RAII); Create first removes leftovers of the same names. Needs
// CAP_NET_ADMIN and CAP_SYS_ADMIN (root here); Create fails with the `ip` command's output when
// not permitted, which tests turn into a GTEST_SKIP. Uses `ip` (iproute2) through /bin/sh.
// Thread-safety: Cut/Heal/addresses from the test thread; EnterNamespace from any thread (it
// moves only the calling thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tokimq::testing {

class NamespaceNetwork {
 public:
  // Builds the bridge and `members` namespaces (1..50). Errors: FAILED_PRECONDITION with the
  // failing `ip` command and its output (not root, no iproute2, no netns support).
  static absl::StatusOr<std::unique_ptr<NamespaceNetwork>> Create(int members);
  ~NamespaceNetwork();
  NamespaceNetwork(const NamespaceNetwork&) = delete;
  NamespaceNetwork& operator=(const NamespaceNetwork&) = delete;

  // The bridge's address in the test's namespace (e.g. for etcd).
  const std::string& hub_address() const { return hub_; }
  // Member i's address (its eth0) and the path of its namespace (/var/run/netns/<name>).
  std::string address(int i) const;
  std::string path(int i) const;

  // Cuts member i off (its veth's near end down) / connects it again. Errors: the ip command's.
  absl::Status Cut(int i);
  absl::Status Heal(int i);

  // Moves the calling thread (only it; threads it starts later inherit it) into member i's
  // namespace: sockets it opens afterwards live there. Errors: setns(2)'s.
  absl::Status EnterNamespace(int i) const;

 private:
  NamespaceNetwork() = default;
  std::string Namespace(int i) const;
  std::string Veth(int i) const;
  void Teardown();

  std::string tag_;     // <pid>
  std::string prefix_;  // "10.A.B."
  std::string hub_;
  std::string bridge_;
  int members_ = 0;
};

}  // namespace tokimq::testing
