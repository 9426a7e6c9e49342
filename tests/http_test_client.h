// A minimal blocking HTTP/1.1 client for tests of the broker's HTTP port: raw bytes over a
// loopback socket (so tests can also send malformed requests), responses parsed just enough to
// assert status, headers and body. Reads are bounded by a socket timeout (5 s).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "support/ports.h"

namespace tokimq::testing {

struct HttpReply {
  int status = 0;  // 0: no parsable answer (the connection closed first)
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

class HttpConnection {
 public:
  explicit HttpConnection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~HttpConnection() { ::close(fd_); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool connected() const { return connected_; }
  bool SendRaw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads one response (headers, then Content-Length bytes of body, or to the close).
  // `head`: a response to HEAD (no body follows whatever the Content-Length).
  HttpReply Read(bool head = false) {
    HttpReply r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return r;
    }
    const std::string header = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t line_end = header.find("\r\n");
    const std::string status_line = header.substr(0, line_end);
    if (status_line.size() < 12) return r;
    r.status = std::atoi(status_line.c_str() + 9);
    while (line_end != std::string::npos) {
      const size_t next = header.find("\r\n", line_end + 2);
      const std::string line = header.substr(line_end + 2, next - line_end - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t v = colon + 1;
        while (v < line.size() && line[v] == ' ') ++v;
        r.headers[name] = line.substr(v);
      }
      line_end = next;
    }
    if (head) return r;
    if (auto it = r.headers.find("content-length"); it != r.headers.end()) {
      const size_t length = std::strtoull(it->second.c_str(), nullptr, 10);
      while (buf_.size() < length) {
        if (!Fill()) break;
      }
      r.body = buf_.substr(0, length);
      buf_.erase(0, std::min(length, buf_.size()));
    } else {
      while (Fill()) {
      }
      r.body = std::move(buf_);
      buf_.clear();
    }
    return r;
  }
  // True when the server closed the connection (read returns 0) within the timeout.
  bool Closed() {
    if (!buf_.empty()) return false;
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }
  HttpReply Get(const std::string& path, const std::string& extra_headers = "") {
    if (!SendRaw("GET " + path + " HTTP/1.1\r\nHost: test\r\n" + extra_headers + "\r\n")) {
      return {};
    }
    return Read();
  }

 private:
  bool Fill() {
    char tmp[8192];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

// One GET on a fresh connection.
inline HttpReply HttpGet(uint16_t port, const std::string& path) {
  HttpConnection c(port);
  return c.Get(path, "Connection: close\r\n");
}

// A TCP port that was free a moment ago (support/ports.h): for a child process that must be
// told its HTTP port.
inline uint16_t FreeTcpPort() { return static_cast<uint16_t>(PickFreePort()); }

}  // namespace tokimq::testing
