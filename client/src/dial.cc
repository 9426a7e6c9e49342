#include "dial.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"

namespace tokimq::client {

absl::Status ErrnoUnavailable(const std::string& what) {
  return absl::UnavailableError(fmt::format("{}: {}", what, std::strerror(errno)));
}

absl::StatusOr<std::pair<std::string, std::string>> SplitHostPort(const std::string& broker) {
  size_t colon = broker.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == broker.size()) {
    return absl::InvalidArgumentError(fmt::format("broker address '{}' is not host:port", broker));
  }
  std::string host = broker.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, broker.substr(colon + 1));
}

absl::StatusOr<int> DialTcp(const std::string& broker, int64_t timeout_ms) {
  auto hp = SplitHostPort(broker);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(hp->first.c_str(), hp->second.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        fmt::format("cannot resolve {}: {}", broker, gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError("no address for " + broker);
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = ErrnoUnavailable("socket");
      continue;
    }
    int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout_ms));
      if (rc == 0) {
        ::close(fd);
        last = absl::DeadlineExceededError(fmt::format("connect to {} timed out", broker));
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc != 0) {
      last = ErrnoUnavailable("cannot connect to " + broker);
      ::close(fd);
      continue;
    }
    fcntl(fd, F_SETFL, flags);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    freeaddrinfo(res);
    return fd;
  }
  freeaddrinfo(res);
  return last;
}

}  // namespace tokimq::client
