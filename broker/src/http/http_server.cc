#include "http/http_server.h"

#include <utility>  // before any boost/asio header (Boost 1.74 with C++20)

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "fmt/format.h"
#include "http/http_router.h"

namespace tokimq::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in`; `plus_is_space` for query parts (application/x-www-form-urlencoded).
bool Decode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = HexValue(in[i + 1]);
      const int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

}  // namespace

bool ParseTarget(const std::string& target, Request* out) {
  const size_t q = target.find('?');
  const std::string_view raw_path = std::string_view(target).substr(0, q);
  if (!Decode(raw_path, false, &out->path) || out->path.empty() || out->path[0] != '/') {
    return false;
  }
  out->query.clear();
  if (q == std::string::npos) return true;
  std::string_view rest = std::string_view(target).substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string key, value;
    if (!Decode(pair.substr(0, eq), true, &key)) return false;
    if (eq != std::string_view::npos && !Decode(pair.substr(eq + 1), true, &value)) return false;
    out->query[key] = value;
  }
  return true;
}

class HttpServer::Impl {
 public:
  Impl(const Router* router, HttpServerOptions options)
      : router_(router), options_(std::move(options)) {}

  absl::Status Start();
  void Stop();
  uint16_t port() const { return port_; }

  const Router* router() const { return router_; }
  const HttpServerOptions& options() const { return options_; }
  std::atomic<int>& connections() { return connections_; }

 private:
  void Accept();

  const Router* router_;
  const HttpServerOptions options_;
  std::atomic<int> connections_{0};  // declared before ioc_: sessions decrement it when freed
  std::optional<asio::io_context> ioc_;
  std::optional<tcp::acceptor> acceptor_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool started_ = false;
};

namespace {

// One HTTP connection: read a request, answer it, repeat while keep-alive. Runs on its own
// strand, so its handlers never run concurrently.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl* server)
      : stream_(std::move(socket)), server_(server) {}
  ~Session() { server_->connections().fetch_sub(1); }

  void Run() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

 private:
  const HttpServerOptions& opts() const { return server_->options(); }

  void ReadHeader() {
    parser_.emplace();
    parser_->body_limit(opts().max_body_bytes);
    parser_->header_limit(opts().max_header_bytes);
    stream_.expires_after(std::chrono::milliseconds(opts().idle_timeout_ms));
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->OnHeader(ec);
                             });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    stream_.expires_after(std::chrono::milliseconds(opts().request_timeout_ms));
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec2, size_t) {
                        self->OnRequest(ec2);
                      });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      return Reply(TextResponse(413, fmt::format("request body above {} bytes\n",
                                                 opts().max_body_bytes)),
                   /*keep_alive=*/false, /*head=*/false, 11);
    }
    if (ec == bhttp::error::header_limit) {
      return Reply(TextResponse(431, "request header fields too large\n"), false, false, 11);
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      return Reply(TextResponse(400, "bad request: " + ec.message() + "\n"), false, false, 11);
    }
    Close();  // the client went away, timed out, or closed between requests
  }

  void OnRequest(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const bhttp::request<bhttp::string_body>& msg = parser_->get();
    Request req;
    req.method = std::string(msg.method_string());
    if (!ParseTarget(std::string(msg.target()), &req)) {
      return Reply(TextResponse(400, "bad request target\n"), false, false, msg.version());
    }
    req.body = msg.body();
    if (auto it = msg.find(bhttp::field::authorization); it != msg.end()) {
      req.authorization = std::string(it->value());
    }
    Reply(server_->router()->Dispatch(req), msg.keep_alive(), req.method == "HEAD",
          msg.version());
  }

  void Reply(Response r, bool keep_alive, bool head, unsigned version) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>();
    res->version(version == 10 ? 10 : 11);
    res->result(static_cast<unsigned>(r.status));
    res->set(bhttp::field::server, "tokimq");
    res->set(bhttp::field::content_type, r.content_type);
    for (auto& [name, value] : r.headers) res->insert(name, value);
    res->keep_alive(keep_alive);
    const size_t length = r.body.size();
    if (!head) res->body() = std::move(r.body);
    res->prepare_payload();
    if (head) res->content_length(length);
    stream_.expires_after(std::chrono::milliseconds(opts().request_timeout_ms));
    bhttp::async_write(stream_, *res,
                       [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
                         if (ec || !keep_alive) return self->Close();
                         self->ReadHeader();
                       });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl* server_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
};

}  // namespace

absl::Status HttpServer::Impl::Start() {
  ioc_.emplace();
  try {
    // A name ("localhost") as well as an address, as the native port takes.
    tcp::resolver resolver(*ioc_);
    const tcp::endpoint endpoint =
        resolver.resolve(options_.bind_address, std::to_string(options_.port),
                         tcp::resolver::passive)
            ->endpoint();
    acceptor_.emplace(asio::make_strand(*ioc_));
    acceptor_->open(endpoint.protocol());
    acceptor_->set_option(asio::socket_base::reuse_address(true));
    acceptor_->bind(endpoint);
    acceptor_->listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_->local_endpoint().port();
  } catch (const std::exception& e) {
    acceptor_.reset();
    ioc_.reset();
    return absl::UnavailableError(fmt::format("HTTP port: cannot listen on {}:{}: {}",
                                              options_.bind_address, options_.port, e.what()));
  }
  Accept();
  started_ = true;
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] { ioc_->run(); });
  }
  return absl::OkStatus();
}

void HttpServer::Impl::Accept() {
  acceptor_->async_accept(asio::make_strand(*ioc_), [this](beast::error_code ec,
                                                           tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;  // Stop()
    if (!ec) {
      if (connections_.fetch_add(1) >= options_.max_connections) {
        connections_.fetch_sub(1);
        beast::error_code ignored;
        socket.close(ignored);  // over the limit: refuse by closing
      } else {
        std::make_shared<Session>(std::move(socket), this)->Run();
      }
    }
    Accept();  // also after an error (e.g. EMFILE): keep serving
  });
}

void HttpServer::Impl::Stop() {
  if (!started_) return;
  started_ = false;
  ioc_->stop();  // the running handlers finish; the acceptor closes below
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  acceptor_.reset();
  ioc_.reset();  // frees the sessions still queued (their sockets close)
}

HttpServer::HttpServer(const Router* router, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(router, std::move(options))) {}
HttpServer::~HttpServer() { Stop(); }
absl::Status HttpServer::Start() { return impl_->Start(); }
void HttpServer::Stop() { impl_->Stop(); }
uint16_t HttpServer::port() const { return impl_->port(); }

}  // namespace tokimq::http
