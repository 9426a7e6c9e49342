#include "broker/server.h"

#include <utility>  // before any boost/asio header (Boost 1.74 with C++20)

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "broker/auth/connection_auth.h"
#include "broker/broker.h"
#include "connection_stream.h"
#include "tls_context.h"
#include "common/clock.h"
#include "common/logging.h"
#include "fmt/format.h"
#include "proto/framing.h"
#include "proto/status.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {

namespace asio = boost::asio;
using asio::ip::tcp;

class Connection;

class Server::Impl {
 public:
  Impl(Broker* broker, ServerOptions options)
      : broker_(broker),
        options_(std::move(options)),
        workers_(static_cast<size_t>(std::max(1, options_.worker_threads))) {
    // One io_context per I/O thread, each connection on one of them: a connection's handlers
    // then always run on one thread without a strand, and the threads do not share a reactor
    // (two threads on one io_context woke each other for every completion; perf showed the
    // scheduler's futex traffic among the top costs of `tokimq-bench --mode lease`).
    const int n = std::max(1, options_.io_threads);
    for (int i = 0; i < n; ++i) {
      ios_.push_back(std::make_unique<asio::io_context>(1));
      guards_.emplace_back(ios_.back()->get_executor());
    }
    acceptor_.emplace(*ios_[0]);
    accept_retry_.emplace(*ios_[0]);
  }

  absl::Status Start();
  void Stop();
  void Accept();
  // Connections still open (mu_ held).
  std::vector<std::shared_ptr<Connection>> LiveConnectionsLocked();
  void Forget(Connection* c) {
    std::lock_guard<std::mutex> lock(mu_);
    connections_.erase(c);
  }

  Broker* broker_;
  ServerOptions options_;
  std::vector<std::unique_ptr<asio::io_context>> ios_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::optional<tcp::acceptor> acceptor_;
  size_t next_io_ = 0;  // round-robin over ios_ for new connections; acceptor thread only
  // Out of descriptors, accept fails at once for as long as a connection waits in the backlog:
  // Accept waits on this timer before trying again, and logs once per episode. Acceptor thread.
  std::optional<asio::steady_timer> accept_retry_;
  bool accept_exhausted_ = false;
  asio::thread_pool workers_;
  std::vector<std::thread> io_threads_;
  std::mutex mu_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections_;
  std::optional<asio::ssl::context> tls_;  // set by Start unless tls_mode is kDisabled
  bool stopped_ = false;
  uint16_t port_ = 0;
};

// One request and its response, allocated on one arena. Shared by the connection's I/O thread
// (parse) and a worker (Handle, serialize); freed with the last reference.
struct Call {
  google::protobuf::Arena arena;
  proto::Request* request = google::protobuf::Arena::CreateMessage<proto::Request>(&arena);
};

// One client connection. Every member is touched only on the connection's I/O thread (its
// io_context is run by that one thread).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl* server, tcp::socket socket)
      : server_(server),
        stream_(std::move(socket)),
        auth_(server->broker_->auth_enabled() ? server->broker_->auth_store() : nullptr) {}

  // Reads requests once the stream carries the protocol (plaintext, or TLS by the server's
  // mode: connection_stream.h).
  void Start() {
    stream_.Open(server_->options_.tls_mode, server_->tls_ ? &*server_->tls_ : nullptr,
                 [self = shared_from_this()](boost::system::error_code ec) {
                   if (ec) {
                     TOKIMQ_LOG_DEBUG("closing {}: TLS or first read: {}", self->peer(),
                                      ec.message());
                     return self->Close();
                   }
                   self->ReadHeader();
                 });
  }
  void Close() {
    if (closed_) return;
    closed_ = true;
    stream_.Close();
    server_->Forget(this);
  }
  auto executor() { return stream_.executor(); }

  // First step of a shutdown (Server::Stop): read no more requests, answer the ones in flight
  // (a long poll ended by Broker::StopLongPolls is answered on its worker), then close. Closing
  // at once dropped those answers when the close ran before the worker's frame was written.
  void Drain() {
    if (closed_) return;
    draining_ = true;
    stream_.ShutdownReceive();  // a pending read ends (EOF)
    CloseIfDrained();
  }

 private:
  void CloseIfDrained() {
    if (draining_ && in_flight_ == 0 && !writing_ && out_.empty()) Close();
  }

  void ReadHeader() {
    if (closed_ || close_after_write_) return;
    if (draining_) return CloseIfDrained();
    if (in_flight_ >= server_->options_.max_in_flight_per_connection) {
      paused_ = true;
      return;
    }
    stream_.AsyncRead(asio::buffer(header_, sizeof(header_)),
              [self = shared_from_this()](boost::system::error_code ec, size_t) {
                self->OnHeader(ec);
              });
  }

  void OnHeader(boost::system::error_code ec) {
    if (ec) return draining_ ? CloseIfDrained() : Close();  // EOF, reset, or a truncated header
    absl::StatusOr<uint32_t> len = wire::DecodeFrameHeader(header_, server_->options_.max_frame_bytes);
    if (!len.ok()) {
      TOKIMQ_LOG_WARN("closing {}: {}", peer(), len.status().ToString());
      return FailAndClose(len.status());
    }
    // Bounded by the frame limit, checked above; not zero-filled (the read overwrites it all).
    body_ = std::make_unique_for_overwrite<char[]>(*len);
    body_len_ = *len;
    stream_.AsyncRead(asio::buffer(body_.get(), body_len_),
              [self = shared_from_this()](boost::system::error_code ec, size_t) {
                self->OnBody(ec);
              });
  }

  void OnBody(boost::system::error_code ec) {
    if (ec) return draining_ ? CloseIfDrained() : Close();  // truncated frame
    // Request and response of one call live on one arena: their many small parts (entries,
    // strings, property maps) are arena allocations, freed at once with the call.
    auto call = std::make_shared<Call>();
    proto::Request* req = call->request;
    absl::Status parsed = wire::DecodeFrameBody(std::string_view(body_.get(), body_len_), req);
    body_.reset();
    body_len_ = 0;
    if (!parsed.ok()) {
      TOKIMQ_LOG_WARN("closing {}: {}", peer(), parsed.ToString());
      return FailAndClose(parsed);
    }
    if (req->body_case() == proto::Request::kHandshake) {
      proto::Response resp;
      server_->broker_->Handle(*req, &resp);
      resp.mutable_handshake()->set_max_frame_bytes(server_->options_.max_frame_bytes);
      if (resp.has_status() && resp.status().code() != 0) {
        resp.clear_body();
      } else {
        handshaken_ = true;
        auth_.OnHandshake(req->handshake(), resp.mutable_handshake());
      }
      Enqueue(resp);
    } else if (!handshaken_) {
      proto::Response resp;
      resp.set_id(req->id());
      wire::ToProto(absl::FailedPreconditionError("handshake required before any request"),
                    resp.mutable_status());
      Enqueue(resp);
    } else if (req->body_case() == proto::Request::kAuthenticate) {
      proto::Response resp;
      resp.set_id(req->id());
      absl::Status s = auth_.Authenticate(req->authenticate(), resp.mutable_authenticate());
      if (!s.ok()) {
        resp.clear_body();
        wire::ToProto(s, resp.mutable_status());
        if (absl::IsUnauthenticated(s)) {
          TOKIMQ_LOG_WARN("closing {}: authentication failed", peer());
          close_after_write_ = true;  // one attempt per connection (and per nonce)
        }
      }
      Enqueue(resp);
    } else if (absl::Status admitted = auth_.Admit(*req); !admitted.ok()) {
      proto::Response resp;
      resp.set_id(req->id());
      wire::ToProto(admitted, resp.mutable_status());
      Enqueue(resp);
    } else if (std::string frame; TryInline(call.get(), &frame)) {
      EnqueueFrame(std::move(frame));
    } else if (req->body_case() == proto::Request::kSend &&
               server_->broker_->SendsAnsweredByGroupCommit()) {
      // flush = "sync": stored here, answered from the group commit's sync thread. The hop to
      // a worker and back cost two thread switches per send, most of the broker's CPU for
      // single-message sends (perf: scheduler and futex time), and the worker had nothing to
      // wait for.
      ++in_flight_;
      SendNoWait(std::move(call));
    } else {
      ++in_flight_;
      asio::post(server_->workers_, [self = shared_from_this(), call = std::move(call)]() mutable {
        // Handled and serialized here, on the worker, not on the connection's I/O thread.
        if (call->request->body_case() == proto::Request::kSend) return self->SendNoWait(call);
        self->Complete(self->HandleToFrame(call.get(), nullptr));
      });
    }
    ReadHeader();
  }

  // A send: stored on the calling thread, answered when durable (Broker::HandleNoWait) without
  // holding the thread through the fsync, so sends from every connection share the group
  // commit's fsyncs instead of one per worker. The work guard keeps the pool's join
  // (Server::Stop) waiting until the answer was handed to the I/O thread. Any thread.
  void SendNoWait(std::shared_ptr<Call> call) {
    proto::Response* resp = google::protobuf::Arena::CreateMessage<proto::Response>(&call->arena);
    const proto::Request* req = call->request;
    server_->broker_->HandleNoWait(*req, resp,
                                   [self = shared_from_this(), call = std::move(call), resp,
                                    work = asio::make_work_guard(server_->workers_)]() mutable {
                                     self->Complete(EncodeResponse(*resp));
                                     work.reset();
                                   });
  }

  // Hands a worker's answer to the connection's I/O thread. Any thread.
  void Complete(std::string frame) {
    asio::post(executor(), [self = shared_from_this(), frame = std::move(frame)]() mutable {
      --self->in_flight_;
      self->EnqueueFrame(std::move(frame));
      self->CloseIfDrained();
      if (self->paused_) {
        self->paused_ = false;
        self->ReadHeader();
      }
    });
  }

  // Requests that never block run here on the connection's I/O thread: the hand-off to a
  // worker and back costs two thread switches, more than an ack or a ready receive itself
  // (perf on `tokimq-bench --mode lease`: a quarter of broker CPU was scheduler time). Acks,
  // renewals and nacks are one unsynced RocksDB write; a receive is tried without its long
  // poll and goes to a worker only when nothing is ready (it may then wait). Sends are not
  // answered here: with flush = "async" they go to the workers, with "sync" OnBody stores them
  // and the group commit answers them (SendNoWait). Returns false (nothing answered) when the
  // request must go elsewhere; else *frame is the response.
  bool TryInline(Call* call, std::string* frame) {
    const proto::Request& req = *call->request;
    switch (req.body_case()) {
      case proto::Request::kAck:
      case proto::Request::kChangeInvisibleDuration:
      case proto::Request::kNack:
      case proto::Request::kReceive:
        break;
      default:
        return false;
    }
    const bool may_wait = req.body_case() == proto::Request::kReceive &&
                          req.receive().long_poll_ms() > 0;
    const int64_t long_poll_ms = may_wait ? req.receive().long_poll_ms() : 0;
    if (may_wait) call->request->mutable_receive()->set_long_poll_ms(0);
    bool empty = false;
    std::string answer = HandleToFrame(call, &empty);
    if (may_wait && empty) {
      call->request->mutable_receive()->set_long_poll_ms(long_poll_ms);  // wait on a worker
      return false;
    }
    *frame = std::move(answer);
    return true;
  }

  // The response frame for call's request. A receive asking for encoded properties is encoded
  // straight from the stored records (Broker::HandleReceiveFrame); anything else goes through
  // a proto::Response on the call's arena. *empty_receive (if given): the request was a receive
  // that succeeded with no message.
  std::string HandleToFrame(Call* call, bool* empty_receive) {
    const proto::Request& req = *call->request;
    proto::Response* resp = google::protobuf::Arena::CreateMessage<proto::Response>(&call->arena);
    if (auto encoded = server_->broker_->HandleReceiveFrame(req)) {
      if (encoded->status.ok()) {
        if (empty_receive) *empty_receive = encoded->messages == 0;
        return std::move(encoded->frame);
      }
      resp->set_id(req.id());  // the error response, as Handle answers one
      wire::ToProto(encoded->status, resp->mutable_status());
    } else {
      server_->broker_->Handle(req, resp);
      auth_.Filter(req, resp);  // ListTopics / Stats: only what this user may see
    }
    if (empty_receive) {
      *empty_receive = req.body_case() == proto::Request::kReceive &&
                       !(resp->has_status() && resp->status().code() != 0) &&
                       resp->receive().messages_size() == 0;
    }
    return EncodeResponse(*resp);
  }

  void FailAndClose(const absl::Status& s) {
    proto::Response resp;
    resp.set_id(0);
    wire::ToProto(s, resp.mutable_status());
    Enqueue(resp);
    close_after_write_ = true;
  }

  // The frame of `resp`, or of an error response with its id when `resp` cannot be encoded;
  // empty if neither can (the connection is then closed). Any thread.
  static std::string EncodeResponse(const proto::Response& resp) {
    absl::StatusOr<std::string> frame = wire::EncodeFrame(resp, UINT32_MAX);
    if (!frame.ok()) {
      proto::Response err;
      err.set_id(resp.id());
      wire::ToProto(frame.status(), err.mutable_status());
      frame = wire::EncodeFrame(err, UINT32_MAX);
      if (!frame.ok()) return std::string();
    }
    return std::move(*frame);
  }

  void Enqueue(const proto::Response& resp) { EnqueueFrame(EncodeResponse(resp)); }

  void EnqueueFrame(std::string frame) {
    if (closed_) return;
    if (frame.empty()) return Close();
    out_.push_back(std::move(frame));
    if (!writing_) Write();
  }

  void Write() {
    if (out_.empty()) {
      writing_ = false;
      if (close_after_write_) Close();
      CloseIfDrained();
      return;
    }
    writing_ = true;
    stream_.AsyncWrite(asio::buffer(out_.front()),
               [self = shared_from_this()](boost::system::error_code ec, size_t) {
                 if (ec) return self->Close();
                 self->out_.pop_front();
                 self->Write();
               });
  }

  std::string peer() const { return stream_.Peer(); }

  Server::Impl* server_;
  ConnectionStream stream_;
  // Written on this I/O thread by the handshake and Authenticate, before any request that
  // reads it is handed to a worker (the post orders the two).
  auth::ConnectionAuth auth_;
  char header_[wire::kFrameHeaderBytes] = {};
  std::unique_ptr<char[]> body_;  // the frame body being read
  size_t body_len_ = 0;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool close_after_write_ = false;
  bool draining_ = false;
  bool closed_ = false;
  bool handshaken_ = false;
  bool paused_ = false;
  int in_flight_ = 0;
};

absl::Status Server::Impl::Start() {
  if (options_.tls_mode != TlsMode::kDisabled) {
    absl::StatusOr<asio::ssl::context> ctx = MakeTlsContext(options_);
    if (!ctx.ok()) return ctx.status();
    tls_.emplace(std::move(*ctx));
  }
  boost::system::error_code ec;
  auto address = asio::ip::make_address(options_.bind_address, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("bad bind address '{}': {}", options_.bind_address, ec.message()));
  }
  tcp::endpoint endpoint(address, options_.port);
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(fmt::format("cannot listen on {}:{}: {}", options_.bind_address,
                                              options_.port, ec.message()));
  }
  port_ = acceptor_->local_endpoint().port();
  Accept();
  for (auto& io : ios_) {
    io_threads_.emplace_back([io = io.get()] { io->run(); });
  }
  TOKIMQ_LOG_INFO("listening on {}:{} (TLS {})", options_.bind_address, port_,
                  TlsModeName(options_.tls_mode));
  return absl::OkStatus();
}

void Server::Impl::Accept() {
  asio::io_context& io = *ios_[next_io_++ % ios_.size()];
  acceptor_->async_accept(io, [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_->is_open()) return;
      if (ec == asio::error::no_descriptors || ec == asio::error::no_memory ||
          ec == asio::error::no_buffer_space || ec.value() == ENFILE) {
        // Issue 25: retrying at once spun and logged per attempt. Wait, then try again.
        if (!accept_exhausted_) {
          TOKIMQ_LOG_WARN("accept: {}; new connections wait until descriptors free up",
                          ec.message());
        }
        accept_exhausted_ = true;
        accept_retry_->expires_after(std::chrono::milliseconds(100));
        accept_retry_->async_wait([this](boost::system::error_code tec) {
          if (!tec && acceptor_->is_open()) Accept();
        });
        return;
      }
      TOKIMQ_LOG_WARN("accept: {}", ec.message());
      return Accept();
    }
    if (accept_exhausted_) {
      TOKIMQ_LOG_INFO("accept: descriptors available again");
      accept_exhausted_ = false;
    }
    boost::system::error_code opt_ec;
    socket.set_option(tcp::no_delay(true), opt_ec);
    auto conn = std::make_shared<Connection>(this, std::move(socket));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      connections_[conn.get()] = conn;
    }
    asio::post(conn->executor(), [conn] { conn->Start(); });
    Accept();
  });
}

std::vector<std::shared_ptr<Connection>> Server::Impl::LiveConnectionsLocked() {
  std::vector<std::shared_ptr<Connection>> conns;
  for (auto& [ptr, weak] : connections_) {
    if (auto c = weak.lock()) conns.push_back(std::move(c));
  }
  return conns;
}

void Server::Impl::Stop() {
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    conns = LiveConnectionsLocked();
  }
  asio::post(*ios_[0], [this] {
    boost::system::error_code ec;
    acceptor_->close(ec);
    accept_retry_->cancel();
  });
  for (auto& c : conns) asio::post(c->executor(), [c] { c->Drain(); });
  workers_.join();  // requests already running finish (long polls are capped)
  // Their answers are written, then each connection closes itself; a client that does not
  // read its socket gets kDrainMs before it is cut off.
  constexpr auto kDrainMs = std::chrono::milliseconds(2000);
  const auto drain_until = RealTimeDeadline(kDrainMs);
  while (RealTimeDeadline(std::chrono::milliseconds(0)) < drain_until) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (connections_.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns = LiveConnectionsLocked();
  }
  for (auto& c : conns) asio::post(c->executor(), [c] { c->Close(); });
  for (auto& g : guards_) g.reset();
  for (auto& io : ios_) io->stop();
  for (std::thread& t : io_threads_) t.join();
  io_threads_.clear();
  TOKIMQ_LOG_INFO("server stopped");
}

Server::Server(Broker* broker, ServerOptions options)
    : impl_(std::make_unique<Impl>(broker, std::move(options))) {}
Server::~Server() { Stop(); }
absl::Status Server::Start() { return impl_->Start(); }
void Server::Stop() { impl_->Stop(); }
uint16_t Server::port() const { return impl_->port_; }

}  // namespace tokimq::broker
