// EtcdClient against a real etcd: KV, transactions, leases, prefix watch with re-sync.
#include "cluster/etcd_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "support/await.h"
#include "support/etcd_test.h"

namespace tokimq::cluster {
namespace {

using testing::AwaitTrue;

class EtcdClientTest : public testing::EtcdTest {};

TEST(EtcdEndpointsTest, ParsesListAndRefusesItemsWithoutPort) {
  auto eps = ParseEndpoints("127.0.0.1:2379, h2:2380");
  ASSERT_TRUE(eps.ok());
  EXPECT_EQ(*eps, (std::vector<std::string>{"127.0.0.1:2379", "h2:2380"}));
  EXPECT_EQ(ParseEndpoints("h1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseEndpoints("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdClientTest, PutGetRangeDelete) {
  ASSERT_TRUE(etcd_client_->Put("/t/a", "1").ok());
  ASSERT_TRUE(etcd_client_->Put("/t/b", "2").ok());
  ASSERT_TRUE(etcd_client_->Put("/u/c", "3").ok());
  auto a = etcd_client_->Get("/t/a");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->value, "1");
  auto range = etcd_client_->RangePrefix("/t/");
  ASSERT_TRUE(range.ok());
  ASSERT_EQ(range->kvs.size(), 2u);
  EXPECT_EQ(range->kvs[0].key, "/t/a");
  EXPECT_EQ(range->kvs[1].value, "2");
  EXPECT_EQ(*etcd_client_->Delete("/t/a"), 1);
  EXPECT_EQ(*etcd_client_->Delete("/t/a"), 0);
  EXPECT_FALSE(etcd_client_->Get("/t/a")->has_value());
}

TEST_F(EtcdClientTest, TxnCreateIfAbsentRefusesSecondCreate) {
  EtcdTxn txn;
  txn.compares.push_back({"/k", EtcdTxn::Compare::Kind::kCreateRevisionEquals, 0});
  txn.puts.push_back({"/k", "first", 0});
  txn.failure_gets.push_back("/k");
  auto r1 = etcd_client_->Txn(txn);
  ASSERT_TRUE(r1.ok());
  EXPECT_TRUE(r1->succeeded);
  txn.puts[0].value = "second";
  auto r2 = etcd_client_->Txn(txn);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->succeeded);
  ASSERT_EQ(r2->failure_kvs.size(), 1u);
  EXPECT_EQ(r2->failure_kvs[0].value, "first");
  // Compare-and-swap on the mod revision.
  EtcdTxn cas;
  cas.compares.push_back({"/k", EtcdTxn::Compare::Kind::kModRevisionEquals,
                          r2->failure_kvs[0].mod_revision});
  cas.puts.push_back({"/k", "swapped", 0});
  EXPECT_TRUE(etcd_client_->Txn(cas)->succeeded);
  EXPECT_FALSE(etcd_client_->Txn(cas)->succeeded);  // revision moved on
  EXPECT_EQ((*etcd_client_->Get("/k"))->value, "swapped");
}

TEST_F(EtcdClientTest, LeasedKeyVanishesWhenLeaseRevokedAndKeepAliveSaysNotFound) {
  auto lease = etcd_client_->LeaseGrant(10);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_client_->Put("/m/b1", "x", *lease).ok());
  EXPECT_EQ((*etcd_client_->Get("/m/b1"))->lease, *lease);
  auto ttl = etcd_client_->LeaseKeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GE(*ttl, 9);
  ASSERT_TRUE(etcd_client_->LeaseRevoke(*lease).ok());
  EXPECT_FALSE(etcd_client_->Get("/m/b1")->has_value());
  EXPECT_EQ(etcd_client_->LeaseKeepAlive(*lease).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, UnreachableEtcdIsUnavailableNotACrash) {
  etcd_.Kill();
  auto c = EtcdClient::Create({{etcd_.endpoint()}, 500});
  ASSERT_TRUE(c.ok());
  absl::Status s = (*c)->Put("/x", "y").status();
  EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
              s.code() == absl::StatusCode::kDeadlineExceeded)
      << s;
}

TEST_F(EtcdClientTest, SecondEndpointIsUsedWhenFirstIsDown) {
  auto c = EtcdClient::Create({{"127.0.0.1:1", etcd_.endpoint()}, 2'000});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->Put("/fallback", "ok").ok());
}

// Collects what a watcher delivers, as a map key -> value.
struct WatchState {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> kv;
  int snapshots = 0;
  void Apply(const WatchBatch& b) {
    std::lock_guard<std::mutex> lock(mu);
    if (b.snapshot) {
      kv.clear();
      ++snapshots;
    }
    for (const WatchEvent& e : b.events) {
      if (e.type == WatchEvent::Type::kPut) {
        kv[e.kv.key] = e.kv.value;
      } else {
        kv.erase(e.kv.key);
      }
    }
    cv.notify_all();
  }
  // Bounded real-time wait (the watch is a network stream).
  bool WaitFor(const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), pred);
  }
};

TEST_F(EtcdClientTest, WatchDeliversSnapshotThenChangesAndResyncsAfterEtcdRestart) {
  ASSERT_TRUE(etcd_client_->Put("/w/a", "1").ok());
  WatchState st;
  auto watcher =
      etcd_client_->WatchPrefix("/w/", [&](const WatchBatch& b) { st.Apply(b); }, 100);
  ASSERT_TRUE(st.WaitFor([&] { return st.snapshots == 1 && st.kv.count("/w/a"); }));
  ASSERT_TRUE(etcd_client_->Put("/w/b", "2").ok());
  ASSERT_TRUE(etcd_client_->Delete("/w/a").ok());
  ASSERT_TRUE(etcd_client_->Put("/other", "3").ok());
  ASSERT_TRUE(st.WaitFor([&] { return st.kv.count("/w/b") && !st.kv.count("/w/a"); }));
  EXPECT_EQ(st.kv.count("/other"), 0u);

  etcd_.Stop();
  ASSERT_TRUE(etcd_.Start());
  // The client's channel reconnects on its own (backoff <= 1 s).
  absl::Status put = absl::UnavailableError("not tried");
  ASSERT_TRUE(AwaitTrue(
      [&] {
        put = etcd_client_->Put("/w/c", "4").status();
        return put.ok();
      },
      std::chrono::seconds(20), "a put after the restart", std::chrono::milliseconds(100)))
      << put;
  ASSERT_TRUE(st.WaitFor([&] { return st.kv.count("/w/c") == 1; }));
  EXPECT_GE(st.snapshots, 2);  // the broken stream was replaced by a fresh snapshot
  EXPECT_EQ(st.kv.at("/w/b"), "2");
  watcher->Stop();
}

}  // namespace
}  // namespace tokimq::cluster
