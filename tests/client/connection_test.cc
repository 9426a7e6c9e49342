// client::Connection (client/src/connection.cc, connection_open.cc) against a fake broker: a
// loopback listener in this process that speaks the native framing (proto/framing.h) and
// answers as each test says.
#include "client/connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "proto/auth_proof.h"
#include "proto/framing.h"
#include "proto/status.h"

namespace tokimq::client {
namespace {

// One accepted connection at a time; Read/Write move whole frames.
class FakeBroker {
 public:
  FakeBroker() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    socklen_t len = sizeof(a);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~FakeBroker() {
    CloseClient();
    ::close(listen_fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  void Accept() { fd_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC); }
  void CloseClient() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // The next request, or nullopt when the client closed.
  std::optional<proto::Request> Read() {
    char hdr[wire::kFrameHeaderBytes];
    if (!ReadAll(hdr, sizeof(hdr))) return std::nullopt;
    absl::StatusOr<uint32_t> len = wire::DecodeFrameHeader(hdr, wire::kDefaultMaxFrameBytes);
    if (!len.ok()) return std::nullopt;
    std::string body(*len, '\0');
    if (!ReadAll(body.data(), body.size())) return std::nullopt;
    proto::Request req;
    if (!wire::DecodeFrameBody(body, &req).ok()) return std::nullopt;
    return req;
  }
  void Write(const proto::Response& resp) {
    absl::StatusOr<std::string> frame = wire::EncodeFrame(resp);
    ASSERT_TRUE(frame.ok());
    ASSERT_EQ(::send(fd_, frame->data(), frame->size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(frame->size()));
  }
  // Accepts, reads the handshake and answers it as a broker of protocol version 1.
  void Handshake() {
    Accept();
    std::optional<proto::Request> req = Read();
    ASSERT_TRUE(req.has_value());
    proto::Response resp;
    resp.set_id(req->id());
    resp.mutable_handshake()->set_protocol_version(wire::kProtocolVersion);
    resp.mutable_handshake()->set_broker_version("fake 1.2.3");
    Write(resp);
  }

 private:
  bool ReadAll(char* p, size_t n) {
    while (n > 0) {
      ssize_t got = ::recv(fd_, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  int listen_fd_ = -1;
  int fd_ = -1;
  uint16_t port_ = 0;
};

ClientOptions Options(const FakeBroker& b) {
  ClientOptions o;
  o.broker = b.address();
  o.client_id = "connection-test";
  o.connect_timeout_ms = 10'000;
  return o;
}

// Opens a connection to `b`, whose handshake runs on another thread.
std::unique_ptr<Connection> OpenTo(FakeBroker& b) {
  std::thread server([&] { b.Handshake(); });
  absl::StatusOr<std::unique_ptr<Connection>> c = Connection::Open(Options(b));
  server.join();
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

proto::Request Stats() {
  proto::Request r;
  r.mutable_stats();
  return r;
}

TEST(Connection, OpenSendsTheHandshakeAndKeepsTheBrokersAnswer) {
  FakeBroker b;
  proto::Request seen;
  std::thread server([&] {
    b.Accept();
    std::optional<proto::Request> req = b.Read();
    ASSERT_TRUE(req.has_value());
    seen = *req;
    proto::Response resp;
    resp.set_id(req->id());
    resp.mutable_handshake()->set_protocol_version(1);
    resp.mutable_handshake()->set_broker_version("fake 1.2.3");
    resp.mutable_handshake()->set_manual_clock(true);
    b.Write(resp);
  });
  absl::StatusOr<std::unique_ptr<Connection>> c = Connection::Open(Options(b));
  server.join();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(seen.handshake().protocol_version(), 1u);
  EXPECT_EQ(seen.handshake().client_id(), "connection-test");
  EXPECT_NE(seen.id(), 0u);
  EXPECT_EQ((*c)->handshake().broker_version(), "fake 1.2.3");
  EXPECT_TRUE((*c)->handshake().manual_clock());
  EXPECT_FALSE((*c)->broken());
}

TEST(Connection, ARefusedHandshakeFailsOpenWithTheBrokersStatus) {
  FakeBroker b;
  std::thread server([&] {
    b.Accept();
    std::optional<proto::Request> req = b.Read();
    ASSERT_TRUE(req.has_value());
    proto::Response resp;
    resp.set_id(req->id());
    wire::ToProto(absl::FailedPreconditionError("protocol version 1 not supported"),
                  resp.mutable_status());
    b.Write(resp);
  });
  absl::StatusOr<std::unique_ptr<Connection>> c = Connection::Open(Options(b));
  server.join();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.status().message(), "protocol version 1 not supported");
}

TEST(Connection, AnAddressWithoutAPortIsInvalidAndAClosedPortUnavailable) {
  ClientOptions o;
  o.broker = "localhost";
  EXPECT_EQ(Connection::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.broker = "localhost:";
  EXPECT_EQ(Connection::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  std::string closed;
  {
    FakeBroker b;  // bound, then closed: nothing listens on its port any more
    closed = b.address();
  }
  o.broker = closed;
  EXPECT_EQ(Connection::Open(o).status().code(), absl::StatusCode::kUnavailable);
}

TEST(Connection, ResponsesAnsweredOutOfOrderReachTheirOwnCallers) {
  FakeBroker b;
  std::unique_ptr<Connection> c = OpenTo(b);
  ASSERT_NE(c, nullptr);
  std::promise<int64_t> first, second;
  c->CallAsync(Stats(), 10'000, [&](absl::StatusOr<proto::Response> r) {
    first.set_value(r.ok() ? r->stats().now_ms() : -1);
  });
  c->CallAsync(Stats(), 10'000, [&](absl::StatusOr<proto::Response> r) {
    second.set_value(r.ok() ? r->stats().now_ms() : -1);
  });
  std::optional<proto::Request> r1 = b.Read();
  std::optional<proto::Request> r2 = b.Read();
  ASSERT_TRUE(r1 && r2);
  EXPECT_NE(r1->id(), r2->id());
  proto::Response a2;  // the second request's answer first
  a2.set_id(r2->id());
  a2.mutable_stats()->set_now_ms(222);
  b.Write(a2);
  proto::Response a1;
  a1.set_id(r1->id());
  a1.mutable_stats()->set_now_ms(111);
  b.Write(a1);
  EXPECT_EQ(first.get_future().get(), 111);
  EXPECT_EQ(second.get_future().get(), 222);
}

TEST(Connection, CallReturnsTheBrokersErrorStatusWithItsText) {
  FakeBroker b;
  std::unique_ptr<Connection> c = OpenTo(b);
  ASSERT_NE(c, nullptr);
  std::thread server([&] {
    std::optional<proto::Request> req = b.Read();
    ASSERT_TRUE(req.has_value());
    proto::Response resp;
    resp.set_id(req->id());
    wire::ToProto(absl::NotFoundError("topic 'x' does not exist"), resp.mutable_status());
    b.Write(resp);
  });
  absl::StatusOr<proto::Response> r = c->Call(Stats(), 10'000);
  server.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "topic 'x' does not exist");
  EXPECT_FALSE(c->broken());  // an error answer is not a transport error
}

TEST(Connection, NoAnswerWithinTheTimeoutIsDeadlineExceeded) {
  FakeBroker b;
  std::unique_ptr<Connection> c = OpenTo(b);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<proto::Response> r = c->Call(Stats(), 100);  // the fake broker never answers
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(c->broken());
}

TEST(Connection, TheBrokerClosingFailsOutstandingCallsAndMarksTheConnectionBroken) {
  FakeBroker b;
  std::unique_ptr<Connection> c = OpenTo(b);
  ASSERT_NE(c, nullptr);
  std::promise<absl::StatusCode> async_code;
  c->CallAsync(Stats(), 60'000, [&](absl::StatusOr<proto::Response> r) {
    async_code.set_value(r.status().code());
  });
  ASSERT_TRUE(b.Read().has_value());
  b.CloseClient();
  EXPECT_EQ(async_code.get_future().get(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(c->broken());
  EXPECT_EQ(c->Call(Stats(), 1'000).status().code(), absl::StatusCode::kUnavailable);
}

TEST(Connection, AResponseWithoutIdFailsTheConnectionWithItsStatus) {
  FakeBroker b;
  std::unique_ptr<Connection> c = OpenTo(b);
  ASSERT_NE(c, nullptr);
  std::thread server([&] {
    ASSERT_TRUE(b.Read().has_value());
    proto::Response resp;  // id 0: the broker could not parse a request
    wire::ToProto(absl::InvalidArgumentError("garbage frame"), resp.mutable_status());
    b.Write(resp);
  });
  absl::StatusOr<proto::Response> r = c->Call(Stats(), 10'000);
  server.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "garbage frame");
  EXPECT_TRUE(c->broken());
}

// Answers the handshake as a broker started with --auth, with `nonce`.
void HandshakeAskingForAuth(FakeBroker& b, const std::string& nonce) {
  b.Accept();
  std::optional<proto::Request> req = b.Read();
  ASSERT_TRUE(req.has_value());
  proto::Response resp;
  resp.set_id(req->id());
  resp.mutable_handshake()->set_protocol_version(wire::kProtocolVersion);
  resp.mutable_handshake()->set_auth_required(true);
  resp.mutable_handshake()->set_auth_nonce(nonce);
  b.Write(resp);
}

TEST(Connection, OpenAuthenticatesWithTheProofOverTheBrokersNonceWhenAsked) {
  FakeBroker b;
  const std::string nonce(wire::kAuthNonceBytes, 'n');
  proto::Request seen;
  std::thread server([&] {
    HandshakeAskingForAuth(b, nonce);
    std::optional<proto::Request> req = b.Read();
    ASSERT_TRUE(req.has_value());
    seen = *req;
    proto::Response resp;
    resp.set_id(req->id());
    resp.mutable_authenticate()->set_access_key("alice");
    b.Write(resp);
  });
  ClientOptions o = Options(b);
  o.access_key = "alice";
  o.secret_key = "alice-secret";
  absl::StatusOr<std::unique_ptr<Connection>> c = Connection::Open(o);
  server.join();
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(seen.has_authenticate());
  EXPECT_EQ(seen.authenticate().access_key(), "alice");
  // HMAC-SHA256 over this connection's nonce and the handshake's client id: 32 raw bytes.
  EXPECT_EQ(seen.authenticate().signature(),
            wire::AuthProof("alice-secret", nonce, "connection-test"));
  EXPECT_EQ(seen.authenticate().signature().size(), 32u);
  EXPECT_NE(seen.authenticate().signature(),
            wire::AuthProof("alice-secret", std::string(32, 'm'), "connection-test"));
  EXPECT_TRUE((*c)->handshake().auth_required());
}

TEST(Connection, ABrokerAskingForAuthWithoutCredentialsFailsOpenUnauthenticated) {
  FakeBroker b;
  std::optional<proto::Request> after_handshake = proto::Request();
  std::thread server([&] {
    HandshakeAskingForAuth(b, std::string(wire::kAuthNonceBytes, 'n'));
    after_handshake = b.Read();  // nullopt: the client closed without sending anything
  });
  absl::StatusOr<std::unique_ptr<Connection>> c = Connection::Open(Options(b));
  server.join();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(c.status().message(),
            "broker " + b.address() +
                " requires authentication: give an access key and a secret key");
  EXPECT_FALSE(after_handshake.has_value());
}

TEST(Connection, ARefusedProofFailsOpenWithTheBrokersStatus) {
  FakeBroker b;
  std::thread server([&] {
    HandshakeAskingForAuth(b, std::string(wire::kAuthNonceBytes, 'n'));
    std::optional<proto::Request> req = b.Read();
    ASSERT_TRUE(req.has_value());
    proto::Response resp;
    resp.set_id(req->id());
    wire::ToProto(absl::UnauthenticatedError("authentication failed"), resp.mutable_status());
    b.Write(resp);
  });
  ClientOptions o = Options(b);
  o.access_key = "alice";
  o.secret_key = "wrong";
  absl::StatusOr<std::unique_ptr<Connection>> c = Connection::Open(o);
  server.join();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(c.status().message(), "authentication failed");
}

TEST(ConnectionHolder, KeepsALiveConnectionAndOpensANewOneAfterItBroke) {
  FakeBroker b;
  ConnectionHolder holder(Options(b));
  std::thread server([&] { b.Handshake(); });
  absl::StatusOr<std::shared_ptr<Connection>> first = holder.Get();
  server.join();
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::shared_ptr<Connection>> again = holder.Get();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), first->get());  // no second handshake: the fake would not answer it

  // A call fails on the broker's close and marks the connection broken; the next Get opens a
  // new one (a second handshake on the same listener).
  std::thread closer([&] {
    ASSERT_TRUE(b.Read().has_value());
    b.CloseClient();
  });
  EXPECT_EQ((*first)->Call(Stats(), 10'000).status().code(), absl::StatusCode::kUnavailable);
  closer.join();
  ASSERT_TRUE((*first)->broken());
  server = std::thread([&] { b.Handshake(); });
  absl::StatusOr<std::shared_ptr<Connection>> reopened = holder.Get();
  server.join();
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_NE(reopened->get(), first->get());
  EXPECT_FALSE((*reopened)->broken());
}

}  // namespace
}  // namespace tokimq::client
