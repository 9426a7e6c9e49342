// The startup handshake of the official RocketMQ 5 clients against the real gRPC endpoint, many
// clients at once: QueryRoute for each topic, a Telemetry stream carrying the client's Settings,
// Heartbeat. Every route and every Settings command is answered (the Node.js client's
// Producer.startup() waits for the Settings answer with no timeout), and with the broker at
// debug level the call trace (call_trace.h) logs each call's arrival and answer.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "apache/rocketmq/v2/service.grpc.pb.h"
#include "broker/broker.h"
#include "call_trace.h"
#include "convert.h"
#include "rocketmq/grpc_endpoint.h"
#include "test_util.h"

namespace tokimq::rocketmq {
namespace {

constexpr int kClients = 24;
constexpr auto kAnswerDeadline = std::chrono::seconds(20);  // a lost answer fails, not hangs

// Routes the default logger into a ring buffer at debug level for the test's lifetime.
class CapturedLog {
 public:
  CapturedLog()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100'000)),
        old_(spdlog::default_logger()),
        old_level_(spdlog::get_level()) {
    auto logger = std::make_shared<spdlog::logger>("captured", sink_);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::debug);
  }
  ~CapturedLog() {
    spdlog::set_default_logger(old_);
    spdlog::set_level(old_level_);
  }
  int Count(const std::string& needle) const {
    int n = 0;
    for (const std::string& line : sink_->last_formatted()) {
      if (line.find(needle) != std::string::npos) ++n;
    }
    return n;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> old_;
  spdlog::level::level_enum old_level_;
};

class ClientStartupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker::BrokerOptions o;
    o.data_dir = dir_.Join("data");
    o.timer_thread_nice = 0;
    auto opened = broker::Broker::Open(o);
    ASSERT_TRUE(opened.ok()) << opened.status();
    broker_ = std::move(*opened);
    CreateTopic("fifo_t", proto::FIFO);
    CreateTopic("normal_t", proto::NORMAL);
    GrpcEndpointOptions e;
    e.port = 0;
    auto started = StartGrpcEndpoint(broker_.get(), e);
    ASSERT_TRUE(started.ok()) << started.status();
    endpoint_ = std::move(*started);
  }
  void TearDown() override {
    if (endpoint_) endpoint_->Shutdown();
    if (broker_) {
      EXPECT_TRUE(broker_->Close().ok());
    }
  }

  void CreateTopic(const std::string& name, proto::TopicType type) {
    proto::Request req;
    req.mutable_create_topic()->mutable_topic()->set_name(name);
    req.mutable_create_topic()->mutable_topic()->set_type(type);
    req.mutable_create_topic()->mutable_topic()->set_queues(4);
    proto::Response resp;
    broker_->Handle(req, &resp);
    ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
  }

  // Its own connection per client (a channel argument unique to the client), as separate
  // client processes would have.
  std::unique_ptr<v2::MessagingService::Stub> Connect(int client) {
    grpc::ChannelArguments args;
    args.SetInt("tokimq.test.client", client);
    return v2::MessagingService::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(endpoint_->port()),
                                  grpc::InsecureChannelCredentials(), args));
  }

  static void Prepare(grpc::ClientContext* ctx, const std::string& client_id) {
    ctx->AddMetadata("x-mq-client-id", client_id);
    ctx->set_deadline(std::chrono::system_clock::now() + kAnswerDeadline);
  }

  // What Producer.startup() of rocketmq-client-nodejs 1.0.8 does: a route per topic, then the
  // settings on a new telemetry stream, then (10 s later, here at once) a heartbeat. Returns ""
  // or what went wrong.
  std::string StartProducer(int client) {
    const std::string id = "client-" + std::to_string(client);
    std::unique_ptr<v2::MessagingService::Stub> stub = Connect(client);
    v2::Endpoints access;
    access.set_scheme(v2::AddressScheme::IPv4);
    v2::Address* a = access.add_addresses();
    a->set_host("127.0.0.1");
    a->set_port(endpoint_->port());
    for (const char* topic : {"fifo_t", "normal_t"}) {
      grpc::ClientContext ctx;
      Prepare(&ctx, id);
      v2::QueryRouteRequest req;
      req.mutable_topic()->set_name(topic);
      *req.mutable_endpoints() = access;
      v2::QueryRouteResponse resp;
      grpc::Status s = stub->QueryRoute(&ctx, req, &resp);
      if (!s.ok()) return id + " QueryRoute: " + s.error_message();
      if (resp.status().code() != v2::Code::OK || resp.message_queues_size() != 4) {
        return id + " QueryRoute " + topic + ": " + resp.status().message();
      }
    }
    grpc::ClientContext ctx;
    Prepare(&ctx, id);
    auto stream = stub->Telemetry(&ctx);
    v2::TelemetryCommand settings;
    v2::Settings* st = settings.mutable_settings();
    st->set_client_type(v2::ClientType::PRODUCER);
    *st->mutable_access_point() = access;
    st->mutable_publishing()->add_topics()->set_name("fifo_t");
    st->mutable_publishing()->add_topics()->set_name("normal_t");
    // The clients sync their settings again every 5 minutes on the same stream: two commands,
    // two answers.
    for (int round = 0; round < 2; ++round) {
      if (!stream->Write(settings)) return id + " Telemetry: write failed";
      v2::TelemetryCommand answer;
      if (!stream->Read(&answer)) {
        return id + " Telemetry: no settings answer (round " + std::to_string(round) +
               "): " + stream->Finish().error_message();
      }
      if (answer.status().code() != v2::Code::OK || !answer.has_settings() ||
          answer.settings().publishing().max_body_size() != GrpcEndpointOptions{}.max_body_size ||
          answer.settings().publishing().topics_size() != 2) {
        return id + " Telemetry: unexpected answer " + answer.ShortDebugString();
      }
    }
    grpc::ClientContext hb_ctx;
    Prepare(&hb_ctx, id);
    v2::HeartbeatRequest hb;
    hb.set_client_type(v2::ClientType::PRODUCER);
    v2::HeartbeatResponse hb_resp;
    grpc::Status hs = stub->Heartbeat(&hb_ctx, hb, &hb_resp);
    if (!hs.ok() || hb_resp.status().code() != v2::Code::OK) return id + " Heartbeat failed";
    stream->WritesDone();
    grpc::Status fs = stream->Finish();
    if (!fs.ok()) return id + " Telemetry finish: " + fs.error_message();
    return "";
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<GrpcEndpoint> endpoint_;
};

TEST_F(ClientStartupTest, ConcurrentProducerStartupsGetEveryRouteAndSettingsAnswer) {
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([this, c, &errors] { errors[c] = StartProducer(c); });
  }
  for (std::thread& t : clients) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// The same startups with the broker logging at debug level when the endpoint starts.
class ClientStartupTraceTest : public ClientStartupTest {
 protected:
  void SetUp() override {
    log_ = std::make_unique<CapturedLog>();
    ClientStartupTest::SetUp();
  }
  void TearDown() override {
    ClientStartupTest::TearDown();
    log_.reset();
  }
  std::unique_ptr<CapturedLog> log_;
};

TEST_F(ClientStartupTraceTest, DebugLevelTracesEveryCallsArrivalAndAnswer) {
  std::vector<std::string> errors(4);
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([this, c, &errors] { errors[c] = StartProducer(c); });
  }
  for (std::thread& t : clients) t.join();
  for (const std::string& e : errors) ASSERT_EQ(e, "");
  for (int c = 0; c < 4; ++c) {
    const std::string by = "by client-" + std::to_string(c);
    EXPECT_EQ(log_->Count("opened QueryRoute " + by), 2);
    EXPECT_EQ(log_->Count("opened Telemetry " + by), 1);
    EXPECT_EQ(log_->Count("opened Heartbeat " + by), 1);
  }
  EXPECT_EQ(log_->Count("got QueryRoute QueryRouteRequest{topic, endpoints}"), 8);
  EXPECT_EQ(log_->Count("sent QueryRoute QueryRouteResponse{status, message_queues} OK"), 8);
  EXPECT_EQ(log_->Count("finished QueryRoute 0 after"), 8);
  EXPECT_EQ(log_->Count("got Telemetry TelemetryCommand{settings}"), 8);
  EXPECT_EQ(log_->Count("sent Telemetry TelemetryCommand{status, settings} OK"), 8);
  EXPECT_EQ(log_->Count("half-closed Telemetry"), 4);
  EXPECT_EQ(log_->Count("finished Telemetry 0 after"), 4);
  EXPECT_EQ(log_->Count("sent Heartbeat HeartbeatResponse{status} OK"), 4);
}

TEST(CallTraceTest, DescribeMessageNamesTheSetFieldsAndTheStatusCode) {
  v2::QueryRouteResponse r;
  EXPECT_EQ(DescribeMessage(r), "QueryRouteResponse{}");
  r.add_message_queues();
  *r.mutable_status() = MakeStatus(v2::Code::TOPIC_NOT_FOUND, "no");
  EXPECT_EQ(DescribeMessage(r), "QueryRouteResponse{status, message_queues} TOPIC_NOT_FOUND");
  v2::TelemetryCommand t;
  t.mutable_settings();
  EXPECT_EQ(DescribeMessage(t), "TelemetryCommand{settings}");
}

}  // namespace
}  // namespace tokimq::rocketmq
