#include "connection_stream.h"

#include "fmt/format.h"

namespace tokimq::broker {

namespace asio = boost::asio;
using asio::ip::tcp;

void ConnectionStream::Open(TlsMode mode, asio::ssl::context* tls,
                            std::function<void(boost::system::error_code)> ready) {
  switch (mode) {
    case TlsMode::kDisabled:
      return ready({});
    case TlsMode::kEnforcing:
      return StartTls(tls, std::move(ready));
    case TlsMode::kPermissive:
      socket_.async_receive(
          asio::buffer(&first_byte_, 1), tcp::socket::message_peek,
          [this, tls, ready = std::move(ready)](boost::system::error_code ec, size_t n) mutable {
            if (!ec && n == 0) ec = asio::error::eof;
            if (ec) return ready(ec);
            if (first_byte_ == 0x16) return StartTls(tls, std::move(ready));
            ready({});
          });
      return;
  }
}

void ConnectionStream::StartTls(asio::ssl::context* tls,
                                std::function<void(boost::system::error_code)> ready) {
  tls_ = std::make_unique<asio::ssl::stream<tcp::socket&>>(socket_, *tls);
  tls_->async_handshake(asio::ssl::stream_base::server, std::move(ready));
}

void ConnectionStream::ShutdownReceive() {
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_receive, ec);
}

void ConnectionStream::Close() {
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

std::string ConnectionStream::Peer() const {
  boost::system::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  return ec ? std::string("client") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

}  // namespace tokimq::broker
