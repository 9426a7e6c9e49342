// Bad input on the wire: each case gets an error response or a closed connection, and the
// broker keeps serving another client that was connected all along.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "proto/framing.h"
#include "proto/tokimq.pb.h"
#include "test_util.h"

namespace tokimq {
namespace {

// The 4-byte frame header followed by `body`. (Built with += rather than operator+ on two
// temporaries: GCC 12 at -O3 reports a false -Werror=restrict for the latter, GCC bug 105329.)
std::string Framed(const char (&hdr)[4], const std::string& body) {
  std::string out(hdr, 4);
  out += body;
  return out;
}

// A raw TCP connection that writes arbitrary bytes and reads whole frames with a timeout.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool Write(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  void Handshake() {
    proto::Request req;
    req.set_id(1);
    req.mutable_handshake()->set_protocol_version(wire::kProtocolVersion);
    ASSERT_TRUE(Write(*wire::EncodeFrame(req)));
    auto resp = ReadResponse();
    ASSERT_TRUE(resp.has_value());
    ASSERT_TRUE(resp->has_handshake());
  }
  // The next response, or nullopt when the broker closed the connection (or 5 s passed).
  std::optional<proto::Response> ReadResponse() {
    std::string header;
    if (!ReadN(4, &header)) return std::nullopt;
    auto len = wire::DecodeFrameHeader(header.data(), wire::kDefaultMaxFrameBytes);
    if (!len.ok()) return std::nullopt;
    std::string body;
    if (!ReadN(*len, &body)) return std::nullopt;
    proto::Response resp;
    if (!wire::DecodeFrameBody(body, &resp).ok()) return std::nullopt;
    return resp;
  }
  // True when the peer closed (EOF or reset) within 5 s.
  bool ClosedByPeer() {
    std::string ignored;
    while (ReadN(1, &ignored)) {
    }
    return eof_;
  }

 private:
  bool ReadN(size_t n, std::string* out) {
    out->assign(n, '\0');
    size_t off = 0;
    while (off < n) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return false;
      ssize_t got = ::recv(fd_, out->data() + off, n - off, 0);
      if (got <= 0) {
        eof_ = true;
        return false;
      }
      off += static_cast<size_t>(got);
    }
    return true;
  }
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
};

class MalformedFramesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<testing::BrokerProcess>(dir_.Join("data"));
    ASSERT_TRUE(broker_->Start());
    admin_ = std::make_unique<client::AdminClient>(broker_->Options());
    proto::TopicConfig t;
    t.set_name("t");
    t.set_type(proto::NORMAL);
    ASSERT_TRUE(admin_->CreateTopic(t).ok());
    producer_ = std::make_unique<client::Producer>(broker_->Options());
    ExpectOtherClientWorks();
  }
  // The well-behaved client keeps its connection and gets answers.
  void ExpectOtherClientWorks() {
    client::OutgoingMessage m;
    m.topic = "t";
    m.body = "still fine";
    auto r = producer_->Send(m);
    EXPECT_TRUE(r.ok()) << r.status();
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<testing::BrokerProcess> broker_;
  std::unique_ptr<client::AdminClient> admin_;
  std::unique_ptr<client::Producer> producer_;
};

TEST_F(MalformedFramesTest, LengthAboveLimitGetsErrorAndClose) {
  RawConnection raw(broker_->port());
  ASSERT_TRUE(raw.connected());
  char hdr[4];
  wire::EncodeFrameHeader(hdr, 0xFFFFFFF0u);  // ~4 GiB announced, never allocated
  ASSERT_TRUE(raw.Write(std::string(hdr, 4)));
  auto resp = raw.ReadResponse();
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->id(), 0u);
  EXPECT_EQ(resp->status().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_TRUE(raw.ClosedByPeer());
  ExpectOtherClientWorks();
}

TEST_F(MalformedFramesTest, GarbageBodyGetsErrorAndClose) {
  RawConnection raw(broker_->port());
  ASSERT_TRUE(raw.connected());
  std::string garbage = "\x0a\x64\x01\x02\xff\xfe\x07";
  char hdr[4];
  wire::EncodeFrameHeader(hdr, static_cast<uint32_t>(garbage.size()));
  ASSERT_TRUE(raw.Write(Framed(hdr, garbage)));
  auto resp = raw.ReadResponse();
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(raw.ClosedByPeer());
  ExpectOtherClientWorks();
}

TEST_F(MalformedFramesTest, HttpRequestIsRefused) {
  RawConnection raw(broker_->port());
  ASSERT_TRUE(raw.connected());
  // "GET " read as a length is ~1.2 GB: above the limit.
  ASSERT_TRUE(raw.Write("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(raw.ClosedByPeer());
  ExpectOtherClientWorks();
}

TEST_F(MalformedFramesTest, TruncatedFrameJustEndsTheConnection) {
  {
    RawConnection raw(broker_->port());
    ASSERT_TRUE(raw.connected());
    raw.Handshake();
    char hdr[4];
    wire::EncodeFrameHeader(hdr, 1000);
    ASSERT_TRUE(raw.Write(Framed(hdr, std::string(10, 'x'))));
  }  // closed mid-frame
  {
    RawConnection raw(broker_->port());
    ASSERT_TRUE(raw.Write(std::string("\x00\x00", 2)));  // half a header
  }
  ExpectOtherClientWorks();
}

TEST_F(MalformedFramesTest, UnknownRequestGetsErrorAndConnectionStaysOpen) {
  RawConnection raw(broker_->port());
  ASSERT_TRUE(raw.connected());
  raw.Handshake();
  // A request with only an id and a field number this broker does not know (999).
  std::string unknown = "\x08\x07";  // id = 7
  unknown += std::string("\xba\x3e\x01\x00", 4);  // field 999, length-delimited, 1 byte
  char hdr[4];
  wire::EncodeFrameHeader(hdr, static_cast<uint32_t>(unknown.size()));
  ASSERT_TRUE(raw.Write(Framed(hdr, unknown)));
  auto resp = raw.ReadResponse();
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->id(), 7u);
  EXPECT_EQ(resp->status().code(), static_cast<int>(absl::StatusCode::kUnimplemented));
  // Same connection, a valid request still works.
  proto::Request req;
  req.set_id(8);
  req.mutable_list_topics();
  ASSERT_TRUE(raw.Write(*wire::EncodeFrame(req)));
  resp = raw.ReadResponse();
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->id(), 8u);
  EXPECT_EQ(resp->list_topics().topics_size(), 1);
  ExpectOtherClientWorks();
}

TEST_F(MalformedFramesTest, RequestBeforeHandshakeIsRefused) {
  RawConnection raw(broker_->port());
  proto::Request req;
  req.set_id(3);
  req.mutable_stats();
  ASSERT_TRUE(raw.Write(*wire::EncodeFrame(req)));
  auto resp = raw.ReadResponse();
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->id(), 3u);
  EXPECT_EQ(resp->status().code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  proto::Request bad_version;
  bad_version.set_id(4);
  bad_version.mutable_handshake()->set_protocol_version(99);
  ASSERT_TRUE(raw.Write(*wire::EncodeFrame(bad_version)));
  resp = raw.ReadResponse();
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->status().code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  ExpectOtherClientWorks();
}

TEST_F(MalformedFramesTest, PipelinedRequestsAllAnswered) {
  client::ClientOptions o = broker_->Options();
  client::Producer producer(o);
  std::vector<std::future<absl::StatusOr<client::SendReceipt>>> futures;
  for (int i = 0; i < 500; ++i) {
    client::OutgoingMessage m;
    m.topic = "t";
    m.body = absl::StrCat("m", i);  // not "m" + std::to_string(i): GCC bug 105329 (see Framed)
    futures.push_back(producer.SendAsync(m));
  }
  std::set<std::string> ids;
  for (auto& f : futures) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status();
    ids.insert(r->message_id);
  }
  EXPECT_EQ(ids.size(), 500u);
}

// ReceiveRequest.encoded_properties: without it (an older client) the properties come as the
// map; with it as the record's property bytes, the map empty. Same properties either way, and
// the C++ client (which sets it) gives them back as a map.
TEST_F(MalformedFramesTest, ReceiveCarriesPropertiesAsMapOrEncoded) {
  proto::TopicConfig t;
  t.set_name("one");  // one queue: receives come in send order
  t.set_type(proto::NORMAL);
  t.set_queues(1);
  ASSERT_TRUE(admin_->CreateTopic(t).ok());
  for (int i = 0; i < 3; ++i) {
    client::OutgoingMessage m;
    m.topic = "one";
    m.body = absl::StrCat("p", i);
    m.key = "k1";
    m.properties = {{"zeta", "last"}, {"alpha", ""}, {"bin", std::string("a\0b", 3)}};
    auto r = producer_->Send(m);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  const std::map<std::string, std::string> user = {
      {"zeta", "last"}, {"alpha", ""}, {"bin", std::string("a\0b", 3)}};
  auto expect_user_props = [&](const std::map<std::string, std::string>& got) {
    for (const auto& [k, v] : user) {
      auto it = got.find(k);
      ASSERT_NE(it, got.end()) << k;
      EXPECT_EQ(it->second, v) << k;
    }
    EXPECT_EQ(got.at("KEYS"), "k1");
    EXPECT_EQ(got.at("UNIQ_KEY").size(), 28u);
  };
  RawConnection raw(broker_->port());
  ASSERT_TRUE(raw.connected());
  raw.Handshake();
  auto receive = [&](int64_t id, bool encoded) {
    proto::Request req;
    req.set_id(id);
    proto::ReceiveRequest* r = req.mutable_receive();
    r->set_group("g");
    r->set_topic("one");
    r->set_max_messages(1);
    r->set_encoded_properties(encoded);
    EXPECT_TRUE(raw.Write(*wire::EncodeFrame(req)));
    return raw.ReadResponse();
  };
  auto as_map = receive(3, false);
  ASSERT_TRUE(as_map.has_value());
  ASSERT_EQ(as_map->receive().messages_size(), 1);
  const proto::ReceivedMessage& a = as_map->receive().messages(0);
  EXPECT_EQ(a.body(), "p0");
  EXPECT_TRUE(a.properties_encoded().empty());
  expect_user_props(std::map<std::string, std::string>(a.properties().begin(),
                                                       a.properties().end()));

  auto encoded = receive(4, true);
  ASSERT_TRUE(encoded.has_value());
  ASSERT_EQ(encoded->receive().messages_size(), 1);
  const proto::ReceivedMessage& b = encoded->receive().messages(0);
  EXPECT_EQ(b.body(), "p1");
  EXPECT_TRUE(b.properties().empty());
  // Decoded by hand from the documented layout: (u32 LE len, key, u32 LE len, value)*,
  // keys ascending.
  std::map<std::string, std::string> decoded;
  std::string_view in = b.properties_encoded();
  std::string prev_key;
  auto u32 = [&](std::string_view s) {
    return static_cast<uint32_t>(static_cast<unsigned char>(s[0])) |
           static_cast<uint32_t>(static_cast<unsigned char>(s[1])) << 8 |
           static_cast<uint32_t>(static_cast<unsigned char>(s[2])) << 16 |
           static_cast<uint32_t>(static_cast<unsigned char>(s[3])) << 24;
  };
  while (!in.empty()) {
    ASSERT_GE(in.size(), 4u);
    const uint32_t kn = u32(in);
    ASSERT_GE(in.size(), 8u + kn);
    std::string key(in.substr(4, kn));
    const uint32_t vn = u32(in.substr(4 + kn));
    ASSERT_GE(in.size(), 8u + kn + vn);
    EXPECT_LT(prev_key, key);
    prev_key = key;
    decoded.emplace(key, std::string(in.substr(8 + kn, vn)));
    in.remove_prefix(8 + kn + vn);
  }
  expect_user_props(decoded);

  // The client library asks for the encoded form and hands back the same map.
  client::SimpleConsumer consumer(broker_->Options(), "g");
  client::ReceiveOptions ro;
  ro.max_messages = 1;
  auto got = consumer.Receive("one", ro);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].body, "p2");
  EXPECT_EQ((*got)[0].key, "k1");
  expect_user_props((*got)[0].properties);
}

}  // namespace
}  // namespace tokimq
