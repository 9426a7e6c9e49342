// Membership, ClusterView and TopicCatalog against a real etcd.
#include "cluster/membership.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "cluster/cluster_view.h"
#include "cluster/keys.h"
#include "cluster/topic_catalog.h"
#include "support/await.h"
#include "support/etcd_test.h"

namespace tokimq::cluster {
namespace {

using namespace std::chrono_literals;
using testing::AwaitTrue;

proto::BrokerRecord Record(const std::string& name, const std::string& address) {
  proto::BrokerRecord r;
  r.set_name(name);
  r.set_address(address);
  return r;
}

// Bounded real-time waits (AwaitTrue): etcd and the watch are another process and thread.
class MembershipTest : public testing::EtcdTest {
 protected:
  MembershipOptions Options(const std::string& name, const std::string& address) {
    MembershipOptions o;
    o.cluster = "c1";
    o.self = Record(name, address);
    o.ttl_s = 3;
    o.retry_ms = 100;
    return o;
  }
};

TEST_F(MembershipTest, SecondBrokerWithSameNameAndOtherAddressIsRefused) {
  Membership first(etcd_client_.get(), Options("b1", "127.0.0.1:1001"));
  ASSERT_TRUE(first.RegisterOnce().ok());
  Membership second(etcd_client_.get(), Options("b1", "127.0.0.1:1002"));
  absl::Status s = second.RegisterOnce();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_NE(s.message().find("127.0.0.1:1001"), std::string_view::npos) << s;
  EXPECT_FALSE(second.registered());
  auto held = etcd_client_->Get(BrokerKey("c1", "b1"));
  ASSERT_TRUE(held.ok() && held->has_value());
  EXPECT_EQ((*held)->lease, first.lease());
}

TEST_F(MembershipTest, RestartWithSameAddressReplacesOwnStaleRecord) {
  Membership before_crash(etcd_client_.get(), Options("b1", "127.0.0.1:1001"));
  ASSERT_TRUE(before_crash.RegisterOnce().ok());
  Membership after_restart(etcd_client_.get(), Options("b1", "127.0.0.1:1001"));
  ASSERT_TRUE(after_restart.RegisterOnce().ok());
  EXPECT_EQ((*etcd_client_->Get(BrokerKey("c1", "b1")))->lease, after_restart.lease());
  // The old lease lapsing no longer removes the record.
  ASSERT_TRUE(etcd_client_->LeaseRevoke(before_crash.lease()).ok());
  EXPECT_TRUE(etcd_client_->Get(BrokerKey("c1", "b1"))->has_value());
}

TEST_F(MembershipTest, LostLeaseIsRegisteredAgainAndCleanStopRemovesRecord) {
  ClusterView view(etcd_client_.get(), "c1");
  view.Start();
  Membership m(etcd_client_.get(), Options("b1", "127.0.0.1:1001"));
  ASSERT_TRUE(m.RegisterOnce().ok());
  m.Start(nullptr);
  ASSERT_TRUE(AwaitTrue([&] { return view.Members().count("b1") == 1; }, 20s, "b1 in the view"));
  ASSERT_TRUE(etcd_client_->LeaseRevoke(m.lease()).ok());  // as if etcd lost it
  ASSERT_TRUE(AwaitTrue([&] { return m.registrations() == 2; }, 20s, "a second registration"));
  ASSERT_TRUE(AwaitTrue([&] { return view.Members().count("b1") == 1; }, 20s, "b1 back"));
  EXPECT_EQ(view.Members().at("b1").address(), "127.0.0.1:1001");
  m.Stop(/*revoke=*/true);
  ASSERT_TRUE(AwaitTrue([&] { return view.Members().empty(); }, 20s, "no members"));
}

TEST_F(MembershipTest, RegistrationWaitsOutEtcdDownAtStart) {
  etcd_.Kill();
  Membership m(etcd_client_.get(), Options("b1", "127.0.0.1:1001"));
  absl::Status first = m.RegisterOnce();
  EXPECT_TRUE(absl::IsUnavailable(first) || absl::IsDeadlineExceeded(first)) << first;
  m.Start(nullptr);
  ClusterView view(etcd_client_.get(), "c1");
  view.Start();
  // Nothing read yet: not "does not exist" (a client would give up), but retry later.
  absl::StatusOr<proto::RouteResponse> unknown = view.Route("orders");
  EXPECT_TRUE(absl::IsUnavailable(unknown.status())) << unknown.status();
  ASSERT_TRUE(etcd_.Start());
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(AwaitTrue([&] { return m.registered(); }, 20s, "registration"));
  // A figure, not a limit (etcd_client.cc: the reconnect backoff).
  std::printf("registered %lld ms after etcd answered again\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - started)
                                         .count()));
  EXPECT_TRUE(etcd_client_->Get(BrokerKey("c1", "b1"))->has_value());
  ASSERT_TRUE(view.WaitLoaded(20'000));
  EXPECT_TRUE(absl::IsNotFound(view.Route("orders").status())) << view.Route("orders").status();
}

TEST_F(MembershipTest, CatalogTxnsAndViewRoute) {
  TopicCatalog catalog(etcd_client_.get(), "c1");
  std::vector<std::map<std::string, proto::TopicConfig>> seen;
  std::mutex mu;
  ClusterView view(etcd_client_.get(), "c1", [&](const auto& topics, bool) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(topics);
  });
  view.Start();
  Membership b1(etcd_client_.get(), Options("b1", "127.0.0.1:1001"));
  ASSERT_TRUE(b1.RegisterOnce().ok());

  proto::TopicConfig t;
  t.set_name("orders");
  t.set_type(proto::DELAY);
  t.set_queues(4);
  for (const char* b : {"b1", "b2"}) {
    proto::TopicPlacement* p = t.add_placement();
    p->set_broker(b);
    p->set_queues(4);
  }
  ASSERT_TRUE(catalog.Create(t).ok());
  EXPECT_EQ(catalog.Create(t).status().code(), absl::StatusCode::kAlreadyExists);
  auto updated = catalog.Update("orders", [](proto::TopicConfig* c) {
    c->add_placement()->set_broker("b3");
    c->mutable_placement(2)->set_queues(2);
    return absl::OkStatus();
  });
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->placement_size(), 3);
  EXPECT_EQ(catalog.Update("nope", [](proto::TopicConfig*) { return absl::OkStatus(); })
                .status()
                .code(),
            absl::StatusCode::kNotFound);

  ASSERT_TRUE(AwaitTrue(
      [&] {
        auto topic = view.Topic("orders");
        return topic && topic->placement_size() == 3 && view.Members().count("b1");
      },
      20s, "the updated topic and b1 in the view"));
  auto route = view.Route("orders");
  ASSERT_TRUE(route.ok());
  ASSERT_EQ(route->brokers_size(), 3);
  EXPECT_TRUE(route->brokers(0).live());
  EXPECT_EQ(route->brokers(0).address(), "127.0.0.1:1001");
  EXPECT_FALSE(route->brokers(1).live());  // b2 never registered
  EXPECT_EQ(route->brokers(2).queues(), 2);
  EXPECT_EQ(view.Route("nope").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(catalog.Delete("orders").ok());
  EXPECT_EQ(catalog.Delete("orders").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(AwaitTrue([&] { return !view.Topic("orders"); }, 20s, "the delete"));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(seen.back().empty());  // the listener saw the delete
}

}  // namespace
}  // namespace tokimq::cluster
