// HttpServer (broker/src/http/http_server.h) on a loopback port: answers through the Router,
// keeps connections alive, and turns bad input into 400 / 413 / 431 for that connection only;
// idle and over-limit connections are closed while the others are served.
#include "http/http_server.h"

#include <gtest/gtest.h>

#include "http/http_router.h"
#include "http_test_client.h"

namespace tokimq::http {
namespace {

using tokimq::testing::HttpConnection;
using tokimq::testing::HttpGet;
using tokimq::testing::HttpReply;

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    router_.Add("GET", "/hello", [](const Request&) { return TextResponse(200, "hi\n"); });
    router_.Add("POST", "/echo", [](const Request& r) {
      Response resp = TextResponse(200, r.body);
      resp.headers.emplace_back("X-Auth", r.authorization);
      resp.headers.emplace_back("X-Query", r.query.count("q") ? r.query.at("q") : "-");
      return resp;
    });
    options.port = 0;
    server_ = std::make_unique<HttpServer>(&router_, options);
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }

  Router router_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(HttpServerTest, AnswersThroughTheRouter) {
  StartServer();
  const HttpReply ok = HttpGet(port_, "/hello");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "hi\n");
  EXPECT_EQ(ok.headers.at("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(HttpGet(port_, "/missing").status, 404);
  EXPECT_EQ(HttpGet(port_, "/echo").status, 405);
}

TEST_F(HttpServerTest, PassesBodyQueryAndAuthorization) {
  StartServer();
  HttpConnection c(port_);
  ASSERT_TRUE(c.SendRaw("POST /echo?q=a%20b HTTP/1.1\r\nHost: t\r\nAuthorization: Basic eDp5\r\n"
                        "Content-Length: 5\r\n\r\nhello"));
  const HttpReply r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.headers.at("x-auth"), "Basic eDp5");
  EXPECT_EQ(r.headers.at("x-query"), "a b");
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer();
  HttpConnection c(port_);
  for (int i = 0; i < 3; ++i) {
    const HttpReply r = c.Get("/hello");
    EXPECT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.body, "hi\n") << i;
  }
  // Connection: close is honoured: the answer comes, then the server closes.
  EXPECT_EQ(c.Get("/hello", "Connection: close\r\n").status, 200);
  EXPECT_TRUE(c.Closed());
}

TEST_F(HttpServerTest, HeadGetsHeadersWithoutBody) {
  StartServer();
  HttpConnection c(port_);
  ASSERT_TRUE(c.SendRaw("HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n"));
  const HttpReply head = c.Read(/*head=*/true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers.at("content-length"), "3");
  // The next answer on the connection starts right after the headers: no body was sent.
  EXPECT_EQ(c.Get("/hello").body, "hi\n");
}

TEST_F(HttpServerTest, MalformedRequestGets400AndServerGoesOn) {
  StartServer();
  {
    HttpConnection c(port_);
    ASSERT_TRUE(c.SendRaw("THIS IS NOT HTTP\r\n\r\n"));
    EXPECT_EQ(c.Read().status, 400);
    EXPECT_TRUE(c.Closed());
  }
  {
    HttpConnection c(port_);
    ASSERT_TRUE(c.SendRaw("GET /hello HTTP/1.1\r\nBad Header Line\r\n\r\n"));
    EXPECT_EQ(c.Read().status, 400);
  }
  {
    HttpConnection c(port_);
    ASSERT_TRUE(c.SendRaw("GET /bad%zz HTTP/1.1\r\nHost: t\r\n\r\n"));
    EXPECT_EQ(c.Read().status, 400);
  }
  EXPECT_EQ(HttpGet(port_, "/hello").status, 200);
}

TEST_F(HttpServerTest, BodyAboveOneMebibyteGets413) {
  StartServer();
  HttpConnection c(port_);
  ASSERT_TRUE(c.SendRaw("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                        std::to_string((1u << 20) + 1) + "\r\n\r\n"));
  EXPECT_EQ(c.Read().status, 413);
  EXPECT_TRUE(c.Closed());
  // Exactly the limit is accepted.
  HttpConnection d(port_);
  const std::string body(1u << 20, 'x');
  ASSERT_TRUE(d.SendRaw("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body));
  const HttpReply r = d.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), body.size());
}

TEST_F(HttpServerTest, HugeHeaderGets431) {
  StartServer();
  HttpConnection c(port_);
  ASSERT_TRUE(c.SendRaw("GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(32 << 10, 'a') +
                        "\r\n\r\n"));
  EXPECT_EQ(c.Read().status, 431);
}

TEST_F(HttpServerTest, SilentClientIsClosedAfterIdleTimeoutWhileOthersAreServed) {
  HttpServerOptions options;
  options.idle_timeout_ms = 200;
  StartServer(options);
  HttpConnection silent(port_);
  HttpConnection slow(port_);
  ASSERT_TRUE(slow.SendRaw("GET /hel"));  // half a request line, then nothing
  EXPECT_EQ(HttpGet(port_, "/hello").status, 200);
  EXPECT_TRUE(silent.Closed());  // within the client's 5 s read timeout
  EXPECT_TRUE(slow.Closed());
}

TEST_F(HttpServerTest, ConnectionsAboveTheLimitAreClosed) {
  HttpServerOptions options;
  options.max_connections = 2;
  StartServer(options);
  HttpConnection a(port_);
  HttpConnection b(port_);
  EXPECT_EQ(a.Get("/hello").status, 200);  // both accepted and counted
  EXPECT_EQ(b.Get("/hello").status, 200);
  HttpConnection c(port_);
  EXPECT_TRUE(c.Closed());
  EXPECT_EQ(a.Get("/hello").status, 200);
}

TEST_F(HttpServerTest, StopClosesOpenConnectionsAndStartFailsOnATakenPort) {
  StartServer();
  HttpConnection idle(port_);
  EXPECT_EQ(idle.Get("/hello").status, 200);
  HttpServerOptions same;
  same.port = port_;
  HttpServer second(&router_, same);
  const absl::Status s = second.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  server_->Stop();
  EXPECT_TRUE(idle.Closed());
}

}  // namespace
}  // namespace tokimq::http
