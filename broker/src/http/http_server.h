// HttpServer: the broker's HTTP port (issue 18): HTTP/1.1 on Boost.Beast over its own Asio
// io_context, answering every request through a Router (http_router.h).
//
// Limits, so that a slow or bad client never stops the broker nor other HTTP clients:
//   - a request body above max_body_bytes (1 MiB) gets 413 and the connection is closed; a
//     header block above max_header_bytes gets 431; bytes that do not parse as HTTP/1.x get 400;
//     each then closes that connection only;
//   - a connection that sends nothing for idle_timeout_ms, or takes longer than
//     request_timeout_ms to send one request or read one answer, is closed;
//   - at most max_connections are open; a further one is closed at once.
// Keep-alive follows the request (HTTP/1.1 default on, "Connection: close" off).
//
// Threads: `threads` I/O threads run the Asio loop and the handlers (a handler that blocks
// holds one of them). The native port and the broker's own threads are never touched.
// Lifetime: Start() binds and starts the threads; Stop() closes the acceptor and every
// connection and joins the threads (idempotent; the destructor calls it). The Router outlives
// the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace tokimq::http {

class Router;

struct HttpServerOptions {
  std::string bind_address = "127.0.0.1";
  uint16_t port = 9464;  // 0: any free port (see HttpServer::port()); the broker treats 0 as off
  int threads = 2;
  uint64_t max_body_bytes = 1u << 20;
  uint32_t max_header_bytes = 16u << 10;
  int64_t idle_timeout_ms = 30'000;
  int64_t request_timeout_ms = 10'000;
  int max_connections = 256;
};

class HttpServer {
 public:
  HttpServer(const Router* router, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the threads. kUnavailable when the address cannot be bound
  // (the message names it).
  absl::Status Start();
  void Stop();
  uint16_t port() const;  // the bound port, after Start

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "/a%20b?x=1&y" -> path "/a b", query {x: "1", y: ""}. False when a percent escape is bad or
// the path decodes to something not starting with '/'.
struct Request;
bool ParseTarget(const std::string& target, Request* out);

}  // namespace tokimq::http
