// SplitHostPort and DialTcp (client/src/dial.h): the TCP part of opening a connection.
#include "dial.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace tokimq::client {
namespace {

using HostPort = std::pair<std::string, std::string>;

TEST(SplitHostPort, SplitsAtTheLastColonAndUnbracketsAnIpv6Host) {
  EXPECT_EQ(*SplitHostPort("broker.example:10911"), HostPort("broker.example", "10911"));
  EXPECT_EQ(*SplitHostPort("[::1]:10911"), HostPort("::1", "10911"));
  EXPECT_EQ(*SplitHostPort("[fe80::1%eth0]:80"), HostPort("fe80::1%eth0", "80"));
  EXPECT_EQ(*SplitHostPort("127.0.0.1:0"), HostPort("127.0.0.1", "0"));
}

TEST(SplitHostPort, AnAddressWithoutHostOrPortIsInvalid) {
  for (const char* bad : {"localhost", "localhost:", ":10911", ""}) {
    absl::StatusOr<HostPort> hp = SplitHostPort(bad);
    EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(SplitHostPort("localhost").status().message(),
            "broker address 'localhost' is not host:port");
}

TEST(DialTcp, ConnectsABlockingCloexecNoDelaySocket) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof(a);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));

  absl::StatusOr<int> fd = DialTcp(address, 5'000);
  ASSERT_TRUE(fd.ok()) << fd.status();
  int no_delay = 0;
  socklen_t optlen = sizeof(no_delay);
  ASSERT_EQ(::getsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &no_delay, &optlen), 0);
  EXPECT_EQ(no_delay, 1);
  EXPECT_EQ(::fcntl(*fd, F_GETFL, 0) & O_NONBLOCK, 0);  // non-blocking only while connecting
  EXPECT_EQ(::fcntl(*fd, F_GETFD, 0) & FD_CLOEXEC, FD_CLOEXEC);
  int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(accepted, 0);  // the connection reached the listener
  ::close(accepted);
  ::close(*fd);
  ::close(listener);
}

TEST(DialTcp, NothingListeningIsUnavailableAndNamesTheBroker) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);  // bound, never listened, closed: the port refuses
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  absl::StatusOr<int> fd = DialTcp(address, 5'000);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fd.status().message(), "cannot connect to " + address + ": Connection refused");
}

}  // namespace
}  // namespace tokimq::client
