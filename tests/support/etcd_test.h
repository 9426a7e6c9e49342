// EtcdTest: the gtest fixture "a real etcd on free loopback ports in a temp dir, and an
// EtcdClient to it", shared by the cluster component's tests (tests/cluster) and, through
// ClusterProcessTest (support/cluster_test.h), by the tests that run tokimq-broker processes
// against etcd (tests/cluster_integration, tests/failover).
//
// Lifetime: one etcd per test (SetUp starts it, the destructor kills it with SIGKILL); its data
// dir is `dir_.Join("etcd")` and outlives Stop/Start inside a test. Single-threaded use from the
// test body; the client is thread-safe as EtcdClient is.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "cluster/etcd_client.h"
#include "cluster/etcd_process.h"
#include "test_util.h"

namespace tokimq::testing {

class EtcdTest : public ::testing::Test {
 protected:
  // `client_timeout_ms`: the request timeout of etcd_client_ (EtcdOptions, ms).
  explicit EtcdTest(int64_t client_timeout_ms = 3'000) : client_timeout_ms_(client_timeout_ms) {}

  // Starts etcd (fails the test when it does not answer within 20 s) and connects etcd_client_.
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start()) << "etcd did not start (etcd-server installed?)";
    auto c = cluster::EtcdClient::Create({{etcd_.endpoint()}, client_timeout_ms_});
    ASSERT_TRUE(c.ok()) << c.status();
    etcd_client_ = std::move(*c);
  }

  TempDir dir_;
  EtcdProcess etcd_{dir_.Join("etcd")};
  std::unique_ptr<cluster::EtcdClient> etcd_client_;

 private:
  int64_t client_timeout_ms_;
};

}  // namespace tokimq::testing
