#include "client/connection.h"

#include "common/clock.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <vector>

#include "fmt/format.h"
#include "proto/framing.h"
#include "proto/status.h"

namespace tokimq::client {
namespace {

constexpr int kPollMs = 50;

absl::Status Unavailable(const std::string& what) {
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

absl::StatusOr<int> ConnectTo(const std::string& broker, int64_t timeout_ms) {
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
      last = Unavailable("socket");
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
      last = Unavailable("cannot connect to " + broker);
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

}  // namespace

Connection::Connection(int fd, ClientOptions options) : fd_(fd), options_(std::move(options)) {
  reader_ = std::thread([this] { ReadLoop(); });
}

Connection::~Connection() {
  stopping_ = true;
  ::shutdown(fd_, SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  ::close(fd_);
  FailAll(absl::CancelledError("connection closed"));
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const ClientOptions& options) {
  auto fd = ConnectTo(options.broker, options.connect_timeout_ms);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<Connection> conn(new Connection(*fd, options));
  proto::Request req;
  req.mutable_handshake()->set_protocol_version(wire::kProtocolVersion);
  req.mutable_handshake()->set_client_id(options.client_id);
  auto resp = conn->Call(std::move(req), options.connect_timeout_ms);
  if (!resp.ok()) return resp.status();
  conn->handshake_ = resp->handshake();
  return conn;
}

void Connection::CallAsync(proto::Request req, int64_t timeout_ms, ResponseCallback done) {
  if (broken_) {
    done(absl::UnavailableError("connection to " + options_.broker + " is broken"));
    return;
  }
  uint64_t id = next_id_.fetch_add(1);
  req.set_id(id);
  absl::StatusOr<std::string> frame = wire::EncodeFrame(req, options_.max_frame_bytes);
  if (!frame.ok()) {
    done(frame.status());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_[id] = {std::move(done),
                    RealTimeDeadline(std::chrono::milliseconds(timeout_ms))};
  }
  if (broken_) {  // the reader may have failed everything just before we registered
    FailAll(absl::UnavailableError("connection to " + options_.broker + " is broken"));
    return;
  }
  absl::Status write_error;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    size_t off = 0;
    while (off < frame->size()) {
      ssize_t n = ::send(fd_, frame->data() + off, frame->size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        write_error = Unavailable("send to " + options_.broker);
        break;
      }
      off += static_cast<size_t>(n);
    }
  }
  if (!write_error.ok()) {
    broken_ = true;
    ::shutdown(fd_, SHUT_RDWR);  // the reader thread fails everything pending
    FailAll(write_error);
  }
}

absl::StatusOr<proto::Response> Connection::Call(proto::Request req, int64_t timeout_ms) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<proto::Response>>>();
  std::future<absl::StatusOr<proto::Response>> future = promise->get_future();
  CallAsync(std::move(req), timeout_ms,
            [promise](absl::StatusOr<proto::Response> r) { promise->set_value(std::move(r)); });
  absl::StatusOr<proto::Response> resp = future.get();
  if (!resp.ok()) return resp.status();
  if (resp->has_status() && resp->status().code() != 0) return wire::FromProto(resp->status());
  return resp;
}

void Connection::FailAll(const absl::Status& s) {
  std::map<uint64_t, Pending> pending;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending.swap(pending_);
  }
  for (auto& [id, p] : pending) p.done(s);
}

void Connection::ExpireDeadlines() {
  auto now = RealTimeDeadline(std::chrono::milliseconds(0));
  std::vector<ResponseCallback> expired;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline <= now) {
        expired.push_back(std::move(it->second.done));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& done : expired) {
    done(absl::DeadlineExceededError("request to " + options_.broker + " timed out"));
  }
}

bool Connection::ReadSome(char* buf, size_t cap, size_t* got, absl::Status* error) {
  while (true) {
    if (stopping_) {
      *error = absl::CancelledError("connection closed");
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, kPollMs);
    // Deadlines are checked when the socket is quiet and at most every kPollMs otherwise
    // (they are whole milliseconds or more; checking on every response cost a lock and a walk
    // of the pending map per response).
    const auto now = RealTimeDeadline(std::chrono::milliseconds(0));
    if (rc == 0 || now - last_expire_ >= std::chrono::milliseconds(kPollMs)) {
      last_expire_ = now;
      ExpireDeadlines();
    }
    if (rc == 0 || (rc < 0 && errno == EINTR)) continue;
    ssize_t n = ::recv(fd_, buf, cap, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n == 0 ? absl::UnavailableError("broker " + options_.broker + " closed the connection")
                      : Unavailable("recv from " + options_.broker);
      return false;
    }
    *got = static_cast<size_t>(n);
    return true;
  }
}

void Connection::ReadLoop() {
  absl::Status error;
  // Responses are read in chunks of up to kReadChunk bytes and parsed from the buffer: one
  // poll + recv per response (or fewer, when several arrive together) instead of two of each
  // (header, then body). The buffer grows to hold a frame larger than a chunk (bounded by
  // max_frame_bytes, checked from the header before growing).
  constexpr size_t kReadChunk = 64 * 1024;
  std::string buf(kReadChunk, '\0');
  size_t begin = 0, end = 0;  // unparsed bytes: buf[begin, end)
  while (true) {
    size_t need = wire::kFrameHeaderBytes;
    if (end - begin >= wire::kFrameHeaderBytes) {
      absl::StatusOr<uint32_t> len =
          wire::DecodeFrameHeader(buf.data() + begin, options_.max_frame_bytes);
      if (!len.ok()) {
        error = len.status();
        break;
      }
      need = wire::kFrameHeaderBytes + *len;
      if (end - begin >= need) {
        proto::Response resp;
        absl::Status parsed = wire::DecodeFrameBody(
            std::string_view(buf.data() + begin + wire::kFrameHeaderBytes, *len), &resp);
        begin += need;
        if (begin == end) begin = end = 0;
        if (!parsed.ok()) {
          error = parsed;
          break;
        }
        if (resp.id() == 0) {
          // The broker could not attribute the error to a request: it is about the connection.
          error = wire::FromProto(resp.status());
          if (error.ok()) error = absl::InternalError("broker sent a response without id");
          break;
        }
        ResponseCallback done;
        {
          std::lock_guard<std::mutex> lock(pending_mu_);
          auto it = pending_.find(resp.id());
          if (it == pending_.end()) continue;  // timed out already
          done = std::move(it->second.done);
          pending_.erase(it);
        }
        done(std::move(resp));
        continue;
      }
    }
    // More bytes needed: make room for the rest of this frame (at least a chunk) and read.
    if (begin > 0) {
      std::memmove(buf.data(), buf.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    if (buf.size() < std::max(need, kReadChunk)) buf.resize(std::max(need, kReadChunk));
    if (buf.size() > kReadChunk && end == 0) buf.resize(kReadChunk);  // shrink after a big one
    size_t got = 0;
    if (!ReadSome(buf.data() + end, buf.size() - end, &got, &error)) break;
    end += got;
  }
  broken_ = true;
  FailAll(error.ok() ? absl::UnavailableError("connection lost") : error);
}

absl::StatusOr<std::shared_ptr<Connection>> ConnectionHolder::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn_ && !conn_->broken()) return conn_;
  auto conn = Connection::Open(options_);
  if (!conn.ok()) return conn.status();
  conn_ = std::shared_ptr<Connection>(std::move(*conn));
  return conn_;
}

absl::StatusOr<proto::Response> ConnectionHolder::Call(proto::Request req, int64_t extra_timeout_ms) {
  auto conn = Get();
  if (!conn.ok()) return conn.status();
  return (*conn)->Call(std::move(req), options_.request_timeout_ms + extra_timeout_ms);
}

}  // namespace tokimq::client
