// The disk watermark refuses producer sends on both APIs: a Broker whose
// watermark lies above any real disk's free space refuses a native Send with
// RESOURCE_EXHAUSTED and a gRPC SendMessage with TOO_MANY_REQUESTS, stores nothing, and still
// serves everything else.
#include <gtest/gtest.h>

#include <string>

#include "broker/broker.h"
#include "messaging_service.h"
#include "test_util.h"

namespace tokimq::rocketmq {
namespace {

TEST(DiskWatermarkSendTest, NativeAndGrpcSendsAreRefusedAboveTheWatermark) {
  tokimq::testing::TempDir dir;
  broker::BrokerOptions o;
  o.data_dir = dir.Join("data");
  o.timer_thread_nice = 0;
  o.disk_min_free_bytes = uint64_t{1} << 60;  // no disk has an exbibyte free
  auto opened = broker::Broker::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  broker::Broker& b = **opened;

  proto::Request create;
  create.mutable_create_topic()->mutable_topic()->set_name("t");
  create.mutable_create_topic()->mutable_topic()->set_type(proto::NORMAL);
  proto::Response r;
  b.Handle(create, &r);
  ASSERT_EQ(r.status().code(), 0) << r.status().message();  // admin requests go on

  proto::Request send;
  proto::SendEntry* e = send.mutable_send()->add_entries();
  e->set_topic("t");
  e->set_body("x");
  r.Clear();
  b.Handle(send, &r);
  EXPECT_EQ(r.status().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(r.status().message().find("disk usage above watermark"), std::string::npos)
      << r.status().message();

  MessagingServiceImpl svc(&b, GrpcEndpointOptions{});
  v2::SendMessageRequest req;
  v2::Message* m = req.add_messages();
  m->mutable_topic()->set_name("t");
  m->set_body("y");
  m->mutable_system_properties()->set_message_id("ID1");
  m->mutable_system_properties()->set_message_type(v2::MessageType::NORMAL);
  v2::SendMessageResponse resp;
  grpc::ServerContext ctx;
  ASSERT_TRUE(svc.SendMessage(&ctx, &req, &resp).ok());
  EXPECT_EQ(resp.status().code(), v2::Code::TOO_MANY_REQUESTS);
  EXPECT_NE(resp.status().message().find("disk usage above watermark"), std::string::npos)
      << resp.status().message();

  proto::Request stats;
  stats.mutable_stats();
  r.Clear();
  b.Handle(stats, &r);
  ASSERT_EQ(r.status().code(), 0);
  EXPECT_EQ(r.stats().sends_refused(), 2);
  EXPECT_EQ(r.stats().disk_state(), proto::DISK_ABOVE_WATERMARK);
  EXPECT_EQ(r.stats().disk_watermark_free_bytes(), uint64_t{1} << 60);
  EXPECT_GT(r.stats().disk_total_bytes(), 0u);
  for (const auto& t : r.stats().topics()) EXPECT_EQ(t.depth(), 0) << t.name();
  EXPECT_TRUE(b.Close().ok());
}

}  // namespace
}  // namespace tokimq::rocketmq
