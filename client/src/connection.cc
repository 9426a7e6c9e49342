// Connection's request pipeline: request ids, the read role (leader/follower), the background
// thread, deadlines and response framing. Opening (dial, TLS, handshake, authentication):
// connection_open.cc.
#include "client/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "dial.h"
#include "proto/framing.h"
#include "proto/status.h"
#include "tls_session.h"

namespace tokimq::client {
namespace {

constexpr int kPollMs = 50;

}  // namespace

Connection::Connection(int fd, int wake_fd, ClientOptions options, std::unique_ptr<TlsSession> tls)
    : fd_(fd), options_(std::move(options)), tls_(std::move(tls)), wake_fd_(wake_fd) {
  background_ = std::thread([this] { BackgroundLoop(); });
}

Connection::~Connection() {
  stopping_ = true;
  ::shutdown(fd_, SHUT_RDWR);  // a thread holding the read role sees EOF
  WakeBackground();
  if (background_.joinable()) background_.join();
  ::close(fd_);
  ::close(wake_fd_);
  FailAll(absl::CancelledError("connection closed"));
}

void Connection::WakeBackground() {
  uint64_t one = 1;
  ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  (void)n;  // EAGAIN: the counter is already non-zero, the thread wakes anyway
}

absl::Status Connection::Start(proto::Request req, int64_t timeout_ms, Pending p) {
  if (broken_) return absl::UnavailableError("connection to " + options_.broker + " is broken");
  uint64_t id = next_id_.fetch_add(1);
  req.set_id(id);
  absl::StatusOr<std::string> frame = wire::EncodeFrame(req, options_.max_frame_bytes);
  if (!frame.ok()) return frame.status();
  p.deadline = RealTimeDeadline(std::chrono::milliseconds(timeout_ms));
  const bool async = p.sync == nullptr;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_.emplace(id, std::move(p));
    if (async) {
      async_pending_.fetch_add(1);
      wake = !reading_;  // nobody reads: the background thread takes the role
    }
  }
  if (broken_) {  // the connection may have failed everything just before we registered
    FailAll(absl::UnavailableError("connection to " + options_.broker + " is broken"));
    return absl::OkStatus();
  }
  absl::Status write_error;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    size_t off = 0;
    if (tls_) {
      write_error = tls_->WriteAll(frame->data(), frame->size());
      off = frame->size();
    }
    while (off < frame->size()) {
      ssize_t n = ::send(fd_, frame->data() + off, frame->size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        write_error = ErrnoUnavailable("send to " + options_.broker);
        break;
      }
      off += static_cast<size_t>(n);
    }
  }
  if (!write_error.ok()) {
    ::shutdown(fd_, SHUT_RDWR);  // a thread holding the read role sees EOF
    Fail(write_error);
    return absl::OkStatus();
  }
  if (wake) WakeBackground();
  return absl::OkStatus();
}

void Connection::CallAsync(proto::Request req, int64_t timeout_ms, ResponseCallback done) {
  Pending p;
  p.done = done;
  absl::Status s = Start(std::move(req), timeout_ms, std::move(p));
  if (!s.ok()) done(s);  // not registered: `done` was copied above, this one is still ours
}

absl::StatusOr<proto::Response> Connection::Call(proto::Request req, int64_t timeout_ms) {
  SyncSlot slot;
  Pending p;
  p.sync = &slot;
  TOKIMQ_RETURN_IF_ERROR(Start(std::move(req), timeout_ms, std::move(p)));
  std::unique_lock<std::mutex> lock(pending_mu_);
  while (!slot.done.load(std::memory_order_acquire)) {
    if (reading_) {
      slot.cv.wait(lock);  // done, or the role was handed to us
      continue;
    }
    reading_ = true;
    lock.unlock();
    absl::Status error = ReadUntil([&] { return slot.done.load(std::memory_order_acquire); });
    if (!error.ok()) Fail(error);
    lock.lock();
    reading_ = false;
    HandOffLocked();
  }
  lock.unlock();
  absl::StatusOr<proto::Response> resp = std::move(slot.result);
  if (!resp.ok()) return resp.status();
  if (resp->has_status() && resp->status().code() != 0) return wire::FromProto(resp->status());
  return resp;
}

void Connection::HandOffLocked() {
  if (broken_) return;
  if (pending_.empty()) {
    // The broker closed the connection (seen by the background thread) while this role holder
    // still had a call outstanding: nobody will read the EOF now, so mark it broken here and
    // the next call reconnects (ConnectionHolder).
    if (peer_closed_) broken_ = true;
    return;
  }
  for (auto& [id, p] : pending_) {
    if (p.sync != nullptr) {  // its owner is waiting in Call
      p.sync->cv.notify_one();
      return;
    }
  }
  WakeBackground();  // only CallAsync requests are outstanding
}

void Connection::BackgroundLoop() {
  bool watch_fd = true;  // until the broker's close has been seen
  while (!stopping_) {
    {
      std::unique_lock<std::mutex> lock(pending_mu_);
      if (!reading_ && async_pending_.load() > 0 && !broken_) {
        reading_ = true;
        lock.unlock();
        absl::Status error =
            ReadUntil([this] { return async_pending_.load() == 0 || stopping_.load(); });
        if (!error.ok()) Fail(error);
        lock.lock();
        reading_ = false;
        HandOffLocked();
        continue;
      }
      if (!watch_fd) {
        peer_closed_ = true;
        // The broker closed the connection while nothing was outstanding: mark it broken so
        // that the next call reconnects (ConnectionHolder) instead of failing on it. Else the
        // holder of the read role reads the EOF, or marks it when it gives the role up
        // (HandOffLocked).
        if (!reading_ && pending_.empty()) broken_ = true;
      }
    }
    // Wait for async work or stop (eventfd), and for the broker closing the connection. Only
    // POLLRDHUP is asked for on the socket: responses wake the thread holding the read role,
    // not this one.
    pollfd fds[2] = {{watch_fd && !broken_ ? fd_ : -1, POLLRDHUP, 0}, {wake_fd_, POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0) continue;  // EINTR
    if (fds[1].revents & POLLIN) {
      uint64_t value = 0;
      ssize_t n = ::read(wake_fd_, &value, sizeof(value));
      (void)n;
    }
    if (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) watch_fd = false;
  }
}

void Connection::CompleteSyncLocked(SyncSlot* slot, absl::StatusOr<proto::Response> r) {
  slot->result = std::move(r);
  slot->done.store(true, std::memory_order_release);
  slot->cv.notify_one();
}

void Connection::Dispatch(proto::Response resp) {
  ResponseCallback done;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    auto it = pending_.find(resp.id());
    if (it == pending_.end()) return;  // timed out already
    if (it->second.sync != nullptr) {
      CompleteSyncLocked(it->second.sync, std::move(resp));
      pending_.erase(it);
      return;
    }
    done = std::move(it->second.done);
    pending_.erase(it);
    async_pending_.fetch_sub(1);
  }
  done(std::move(resp));
}

void Connection::Fail(const absl::Status& s) {
  broken_ = true;
  FailAll(s);
}

void Connection::FailAll(const absl::Status& s) {
  std::map<uint64_t, Pending> pending;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending.swap(pending_);
    async_pending_.store(0);
    for (auto& [id, p] : pending) {
      if (p.sync != nullptr) CompleteSyncLocked(p.sync, s);
    }
  }
  for (auto& [id, p] : pending) {
    if (p.sync == nullptr) p.done(s);
  }
}

void Connection::ExpireDeadlines() {
  auto now = RealTimeDeadline(std::chrono::milliseconds(0));
  const absl::Status timed_out =
      absl::DeadlineExceededError("request to " + options_.broker + " timed out");
  std::vector<ResponseCallback> expired;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      if (it->second.sync != nullptr) {
        CompleteSyncLocked(it->second.sync, timed_out);
      } else {
        expired.push_back(std::move(it->second.done));
        async_pending_.fetch_sub(1);
      }
      it = pending_.erase(it);
    }
  }
  for (auto& done : expired) done(timed_out);
}

bool Connection::ReadSome(char* buf, size_t cap, size_t* got, absl::Status* error) {
  while (true) {
    if (stopping_) {
      *error = absl::CancelledError("connection closed");
      return false;
    }
    if (tls_ && tls_->HasBuffered()) {  // decrypted already: the socket may stay quiet
      ssize_t n = tls_->Read(buf, cap, error);
      if (n < 0) return false;
      *got = static_cast<size_t>(n);
      if (n > 0) return true;
    }
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, kPollMs);
    const int poll_errno = errno;  // ExpireDeadlines below runs callbacks, which may change it
    // Deadlines are checked when the socket is quiet and at most every kPollMs otherwise
    // (they are whole milliseconds or more; checking on every response cost a lock and a walk
    // of the pending map per response).
    const auto now = RealTimeDeadline(std::chrono::milliseconds(0));
    if (rc == 0 || now - last_expire_ >= std::chrono::milliseconds(kPollMs)) {
      last_expire_ = now;
      ExpireDeadlines();
    }
    if (rc == 0 || (rc < 0 && poll_errno == EINTR)) return true;  // *got == 0: the caller re-checks
    if (tls_) {  // 0: a partial TLS record so far
      ssize_t n = tls_->Read(buf, cap, error);
      if (n < 0) return false;
      *got = static_cast<size_t>(n);
      return true;
    }
    ssize_t n = ::recv(fd_, buf, cap, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n == 0 ? absl::UnavailableError("broker " + options_.broker + " closed the connection")
                      : ErrnoUnavailable("recv from " + options_.broker);
      return false;
    }
    *got = static_cast<size_t>(n);
    return true;
  }
}

absl::Status Connection::ReadUntil(const std::function<bool()>& until) {
  while (!until()) TOKIMQ_RETURN_IF_ERROR(PumpOnce());
  return absl::OkStatus();
}

absl::Status Connection::PumpOnce() {
  // Responses are read in chunks of up to kReadChunk bytes and parsed from the buffer: one
  // poll + recv per response (or fewer, when several arrive together) instead of two of each
  // (header, then body). The buffer grows to hold a frame larger than a chunk (bounded by
  // max_frame_bytes, checked from the header before growing).
  constexpr size_t kReadChunk = 64 * 1024;
  size_t need = wire::kFrameHeaderBytes;
  if (rend_ - rbegin_ >= wire::kFrameHeaderBytes) {
    absl::StatusOr<uint32_t> len =
        wire::DecodeFrameHeader(rbuf_.data() + rbegin_, options_.max_frame_bytes);
    if (!len.ok()) return len.status();
    need = wire::kFrameHeaderBytes + *len;
    if (rend_ - rbegin_ >= need) {
      proto::Response resp;
      absl::Status parsed = wire::DecodeFrameBody(
          std::string_view(rbuf_.data() + rbegin_ + wire::kFrameHeaderBytes, *len), &resp);
      rbegin_ += need;
      if (rbegin_ == rend_) rbegin_ = rend_ = 0;
      if (!parsed.ok()) return parsed;
      if (resp.id() == 0) {
        // The broker could not attribute the error to a request: it is about the connection.
        absl::Status error = wire::FromProto(resp.status());
        if (error.ok()) error = absl::InternalError("broker sent a response without id");
        return error;
      }
      Dispatch(std::move(resp));
      return absl::OkStatus();
    }
  }
  // More bytes needed: make room for the rest of this frame (at least a chunk) and read.
  if (rbegin_ > 0) {
    std::memmove(rbuf_.data(), rbuf_.data() + rbegin_, rend_ - rbegin_);
    rend_ -= rbegin_;
    rbegin_ = 0;
  }
  if (rbuf_.size() < std::max(need, kReadChunk)) rbuf_.resize(std::max(need, kReadChunk));
  if (rbuf_.size() > kReadChunk && rend_ == 0) rbuf_.resize(kReadChunk);  // shrink after a big one
  size_t got = 0;
  absl::Status error;
  if (!ReadSome(rbuf_.data() + rend_, rbuf_.size() - rend_, &got, &error)) return error;
  rend_ += got;
  return absl::OkStatus();
}

}  // namespace tokimq::client
