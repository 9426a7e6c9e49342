#include "net.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tokimq::bench {

absl::StatusOr<std::unique_ptr<TcpStream>> TcpStream::Connect(const std::string& addr) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("address without port: " + addr);
  std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::UnavailableError("cannot resolve " + addr);
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) return absl::UnavailableError("cannot connect to " + addr + ": " + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return std::unique_ptr<TcpStream>(new TcpStream(fd));
}

TcpStream::~TcpStream() { ::close(fd_); }

absl::Status TcpStream::WriteAll(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(std::string("send: ") + std::strerror(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status TcpStream::Fill() {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (1u << 20)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  char tmp[64 * 1024];
  while (true) {
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return absl::UnavailableError("connection closed by peer");
    if (n < 0) return absl::UnavailableError(std::string("recv: ") + std::strerror(errno));
    buf_.append(tmp, static_cast<size_t>(n));
    return absl::OkStatus();
  }
}

absl::Status TcpStream::ReadLine(std::string* line) {
  while (true) {
    size_t eol = buf_.find("\r\n", pos_);
    if (eol != std::string::npos) {
      line->assign(buf_, pos_, eol - pos_);
      pos_ = eol + 2;
      return absl::OkStatus();
    }
    absl::Status s = Fill();
    if (!s.ok()) return s;
  }
}

absl::Status TcpStream::ReadExact(size_t n, std::string* out) {
  while (buf_.size() - pos_ < n) {
    absl::Status s = Fill();
    if (!s.ok()) return s;
  }
  out->assign(buf_, pos_, n);
  pos_ += n;
  return absl::OkStatus();
}

}  // namespace tokimq::bench
