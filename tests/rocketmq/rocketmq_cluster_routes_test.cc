// Cluster routing of the RocketMQ endpoint (rocketmq/src/cluster_routes.h): native routes as
// RocketMQ brokers and endpoints, and the refusals of requests meant for another broker.
#include <gtest/gtest.h>

#include <string>

#include "cluster_routes.h"

namespace tokimq::rocketmq {
namespace {

proto::BrokerRoute* AddBroker(proto::RouteResponse* r, const std::string& name,
                              const std::string& grpc, int32_t queues, bool live) {
  proto::BrokerRoute* b = r->add_brokers();
  b->set_broker(name);
  b->set_address(live ? "127.0.0.1:1" : "");
  b->set_grpc_address(grpc);
  b->set_queues(queues);
  b->set_live(live);
  return b;
}

TEST(ClusterRoutesTest, EndpointsOfTellsIpv4Ipv6AndDomainNamesApart) {
  auto v4 = EndpointsOf("10.0.0.12:8081");
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->scheme(), v2::AddressScheme::IPv4);
  ASSERT_EQ(v4->addresses_size(), 1);
  EXPECT_EQ(v4->addresses(0).host(), "10.0.0.12");
  EXPECT_EQ(v4->addresses(0).port(), 8081);

  auto v6 = EndpointsOf("[::1]:9000");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->scheme(), v2::AddressScheme::IPv6);
  EXPECT_EQ(v6->addresses(0).host(), "::1");
  EXPECT_EQ(v6->addresses(0).port(), 9000);

  auto dns = EndpointsOf("broker-2.mq.internal:8081");
  ASSERT_TRUE(dns.has_value());
  EXPECT_EQ(dns->scheme(), v2::AddressScheme::DOMAIN_NAME);
  EXPECT_EQ(dns->addresses(0).host(), "broker-2.mq.internal");
}

TEST(ClusterRoutesTest, EndpointsOfRefusesMalformedAddresses) {
  for (const char* bad : {"", "10.0.0.1", ":8081", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:65536",
                          "10.0.0.1:80x", "::1:8081", "[zz]:8081"}) {
    EXPECT_FALSE(EndpointsOf(bad).has_value()) << bad;
  }
}

TEST(ClusterRoutesTest, GrpcBrokersAreTheLiveOnesWithAGrpcEndpointInPlacementOrder) {
  proto::RouteResponse r;
  AddBroker(&r, "b2", "127.0.0.1:7002", 4, true);
  AddBroker(&r, "b0", "127.0.0.1:7000", 2, true);
  AddBroker(&r, "down", "127.0.0.1:7003", 4, false);  // lease lapsed
  AddBroker(&r, "nogrpc", "", 4, true);              // --grpc-port 0
  AddBroker(&r, "bad", "not-an-address", 4, true);
  std::vector<GrpcBroker> got = GrpcBrokersOf(r);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "b2");
  EXPECT_EQ(got[0].queues, 4);
  EXPECT_EQ(got[0].endpoints.addresses(0).port(), 7002);
  EXPECT_EQ(got[1].name, "b0");
  EXPECT_EQ(got[1].queues, 2);
  EXPECT_EQ(got[1].endpoints.addresses(0).port(), 7000);
}

TEST(ClusterRoutesTest, ForeignQueueIsNotFoundNamingTheOwnerAndItsEndpoint) {
  proto::RouteResponse r;
  AddBroker(&r, "b1", "127.0.0.1:7001", 4, true);
  AddBroker(&r, "b2", "10.0.0.12:8081", 4, true);
  v2::Status s = ForeignQueueStatus("orders", 0, "b2", "b1", &r);
  EXPECT_EQ(s.code(), v2::Code::NOT_FOUND);
  EXPECT_EQ(s.message(),
            "queue 0 of topic 'orders' is on broker 'b2' (gRPC 10.0.0.12:8081), not on this "
            "broker 'b1': send the request to that broker's endpoint (QueryRoute lists every "
            "broker's); tokimq brokers do not forward requests");
  // An assignment (queue -1) names the topic; an owner the route does not know is named alone.
  s = ForeignQueueStatus("orders", -1, "b9", "b1", &r);
  EXPECT_EQ(s.code(), v2::Code::NOT_FOUND);
  EXPECT_EQ(s.message().rfind("topic 'orders' is on broker 'b9', not on this broker 'b1'", 0),
            0u)
      << s.message();
}

TEST(ClusterRoutesTest, TopicNotHereListsItsHosts) {
  proto::RouteResponse r;
  r.set_cluster("c1");
  r.mutable_topic()->set_name("fx");
  AddBroker(&r, "b0", "127.0.0.1:7000", 4, true);
  AddBroker(&r, "b1", "127.0.0.1:7001", 4, false);
  EXPECT_TRUE(HostsTopic(r, "b0"));
  EXPECT_TRUE(HostsTopic(r, "b1"));
  EXPECT_FALSE(HostsTopic(r, "b2"));
  v2::Status s = TopicNotHereStatus(r, "b2");
  EXPECT_EQ(s.code(), v2::Code::NOT_FOUND);
  EXPECT_EQ(s.message(),
            "topic 'fx' is not placed on this broker 'b2' of cluster 'c1'; its brokers: 'b0' "
            "(gRPC 127.0.0.1:7000), 'b1' (not live): send to one of them (QueryRoute lists "
            "their endpoints); tokimq brokers do not forward requests");
}

}  // namespace
}  // namespace tokimq::rocketmq
