// ConnectionStream: the byte stream of one native-protocol connection — the accepted TCP socket,
// or a TLS stream over it (docs/security.md "TLS", docs/protocol.md "TLS").
//
// Open() decides which, by the server's TLS mode: disabled reads the plaintext protocol at once;
// enforcing runs the TLS handshake first; permissive peeks at the first byte without consuming
// it: 0x16 (a TLS handshake record) starts TLS, anything else is the plaintext protocol (as
// RocketMQ's proxy tells its two protocols apart on one port).
//
// Thread-safety: none; used on its connection's I/O thread only (as the Connection owning it).
#pragma once

#include <utility>  // before any boost/asio header (Boost 1.74 with C++20)

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <functional>
#include <memory>
#include <string>

#include "broker/server.h"

namespace tokimq::broker {

class ConnectionStream {
 public:
  explicit ConnectionStream(boost::asio::ip::tcp::socket socket) : socket_(std::move(socket)) {}

  // Calls `ready` once the stream carries the protocol: with no error at once (disabled, or a
  // plaintext first byte in permissive mode), or after the TLS handshake; with the error of the
  // peek or the handshake otherwise (the caller closes). `tls` must outlive the stream and is
  // unused when `mode` is kDisabled.
  void Open(TlsMode mode, boost::asio::ssl::context* tls,
            std::function<void(boost::system::error_code)> ready);

  template <typename Buffer, typename Handler>
  void AsyncRead(const Buffer& buffer, Handler&& handler) {
    if (tls_) return boost::asio::async_read(*tls_, buffer, std::forward<Handler>(handler));
    boost::asio::async_read(socket_, buffer, std::forward<Handler>(handler));
  }
  template <typename Buffer, typename Handler>
  void AsyncWrite(const Buffer& buffer, Handler&& handler) {
    if (tls_) return boost::asio::async_write(*tls_, buffer, std::forward<Handler>(handler));
    boost::asio::async_write(socket_, buffer, std::forward<Handler>(handler));
  }

  // Ends a pending read (it completes with EOF); writes go on.
  void ShutdownReceive();
  // Shuts down and closes the socket (errors ignored: the peer may be gone).
  void Close();
  auto executor() { return socket_.get_executor(); }
  // "address:port" of the peer, or "client" when the socket no longer has one.
  std::string Peer() const;

 private:
  void StartTls(boost::asio::ssl::context* tls, std::function<void(boost::system::error_code)> ready);

  boost::asio::ip::tcp::socket socket_;
  std::unique_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;  // over socket_
  char first_byte_ = 0;  // permissive mode's peek
};

}  // namespace tokimq::broker
