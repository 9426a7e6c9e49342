#include "broker/server.h"

#include <utility>  // before any boost/asio header (Boost 1.74 with C++20)

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "broker/broker.h"
#include "connection.h"
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
    context_.broker = broker_;
    context_.options = &options_;
    context_.workers = &workers_;
    context_.forget = [this](Connection* c) { Forget(c); };
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
  ConnectionContext context_;              // complete once Start set its tls
  bool stopped_ = false;
  uint16_t port_ = 0;
};

absl::Status Server::Impl::Start() {
  if (options_.tls_mode != TlsMode::kDisabled) {
    absl::StatusOr<asio::ssl::context> ctx = MakeTlsContext(options_);
    if (!ctx.ok()) return ctx.status();
    tls_.emplace(std::move(*ctx));
    context_.tls = &*tls_;
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
  acceptor_->async_accept(io, [this, io = &io](boost::system::error_code ec, tcp::socket socket) {
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
    auto conn = std::make_shared<Connection>(&context_, io, std::move(socket));
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
