// GroupCatalog (consumer-group settings in etcd) against a real etcd.
#include "cluster/group_catalog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "cluster/keys.h"
#include "cluster/topic_catalog.h"
#include "support/await.h"
#include "support/etcd_test.h"

namespace tokimq::cluster {
namespace {

using namespace std::chrono_literals;
using testing::AwaitTrue;

proto::GroupConfig Group(const std::string& name, proto::DeliveryOrder order) {
  proto::GroupConfig g;
  g.set_name(name);
  g.set_delivery_order(order);
  g.set_created_ms(1764642000000);
  return g;
}

class GroupCatalogTest : public testing::EtcdTest {};

TEST_F(GroupCatalogTest, CreateIsOnceUpdateChangesTheStoredRecord) {
  GroupCatalog catalog(etcd_client_.get(), "c1");
  ASSERT_TRUE(catalog.Create(Group("billing", proto::ORDERLY)).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(catalog.Create(Group("billing", proto::CONCURRENTLY)).status()));
  auto kv = etcd_client_->Get("/tokimq/c1/consumer_groups/billing");
  ASSERT_TRUE(kv.ok() && kv->has_value());
  EXPECT_EQ((*kv)->value,
            R"({"name":"billing","delivery_order":"ORDERLY","created_ms":"1764642000000"})");

  auto updated = catalog.Update("billing", [](proto::GroupConfig* g) {
    g->set_delivery_order(proto::CONCURRENTLY);
    return absl::OkStatus();
  });
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->delivery_order(), proto::CONCURRENTLY);
  EXPECT_EQ(updated->created_ms(), 1764642000000);  // kept
  EXPECT_TRUE(absl::IsNotFound(
      catalog.Update("nobody", [](proto::GroupConfig*) { return absl::OkStatus(); }).status()));
  // An error of the change is returned as is and nothing is written.
  auto refused = catalog.Update("billing", [](proto::GroupConfig*) {
    return absl::InvalidArgumentError("no");
  });
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
}

TEST_F(GroupCatalogTest, WatchDeliversTheSnapshotThenChangesAndIgnoresOtherKeys) {
  GroupCatalog writer(etcd_client_.get(), "c1");
  ASSERT_TRUE(writer.Create(Group("a", proto::ORDERLY)).ok());
  // A topic and another cluster's group are not consumer groups of c1.
  proto::TopicConfig t;
  t.set_name("orders");
  ASSERT_TRUE(TopicCatalog(etcd_client_.get(), "c1").Create(t).ok());
  ASSERT_TRUE(GroupCatalog(etcd_client_.get(), "c2").Create(Group("x", proto::ORDERLY)).ok());

  GroupCatalog watcher(etcd_client_.get(), "c1");
  std::mutex mu;
  std::vector<std::pair<size_t, bool>> calls;  // (groups, snapshot)
  watcher.Watch([&](const std::map<std::string, proto::GroupConfig>& groups, bool snapshot) {
    std::lock_guard<std::mutex> lock(mu);
    calls.emplace_back(groups.size(), snapshot);
  });
  ASSERT_TRUE(AwaitTrue([&] { return watcher.Groups().size() == 1; }, 20s, "the snapshot"));
  ASSERT_TRUE(writer.Create(Group("b", proto::CONCURRENTLY)).ok());
  ASSERT_TRUE(AwaitTrue([&] { return watcher.Groups().size() == 2; }, 20s, "group b"));
  EXPECT_EQ(watcher.Groups().at("a").delivery_order(), proto::ORDERLY);
  EXPECT_EQ(watcher.Groups().at("b").delivery_order(), proto::CONCURRENTLY);
  watcher.Stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls.front(), std::make_pair(size_t{1}, true));
  EXPECT_EQ(calls.back(), std::make_pair(size_t{2}, false));
}

}  // namespace
}  // namespace tokimq::cluster
