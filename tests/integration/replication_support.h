// Helpers of the replication integration tests that drive real brokers through the
// replication_role admin request (docs/replication.md "Roles and terms"): read a replica's
// view, promote it, tell it whom to follow, wait for it to copy up to an offset. Bounded real
// waits (support/await.h): these tests run real processes.
#pragma once

#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "broker_process.h"
#include "client/connection.h"
#include "proto/tokimq.pb.h"
#include "support/await.h"
#include "test_util.h"

namespace tokimq::testing {

// The replica's answer to replication_role `r` (empty: only report).
inline absl::StatusOr<proto::ReplicationRoleResponse> ReplicationRole(
    const BrokerProcess& b, proto::ReplicationRoleRequest r = {}) {
  auto conn = client::Connection::Open(b.Options());
  if (!conn.ok()) return conn.status();
  proto::Request req;
  *req.mutable_replication_role() = r;
  auto resp = (*conn)->Call(std::move(req), 5000);  // the broker's error as a status
  if (!resp.ok()) return resp.status();
  return resp->replication_role();
}

// Makes `b` the leader of `term`.
inline absl::StatusOr<proto::ReplicationRoleResponse> PromoteTo(const BrokerProcess& b,
                                                                int64_t term) {
  proto::ReplicationRoleRequest r;
  r.set_promote(true);
  r.set_term(term);
  return ReplicationRole(b, r);
}

// Makes `b` a follower of `leader` in `term`.
inline absl::StatusOr<proto::ReplicationRoleResponse> FollowIn(const BrokerProcess& b, int64_t term,
                                                               const BrokerProcess& leader) {
  proto::ReplicationRoleRequest r;
  r.set_term(term);
  r.set_leader_address(leader.Options().broker);
  return ReplicationRole(b, r);
}

// Waits (bounded real time) until `replica` answers as a follower whose CommitLog end is
// `offset` or more.
inline ::testing::AssertionResult AwaitCopiedTo(
    const BrokerProcess& replica, int64_t offset,
    std::chrono::milliseconds within = std::chrono::seconds(30)) {
  return AwaitTrue(
      [&] {
        auto r = ReplicationRole(replica);
        return r.ok() && r->role() == "follower" && r->max_offset() >= offset;
      },
      within, "a follower at CommitLog offset " + std::to_string(offset));
}

// Fixture base of the tests that start a broker group's replicas by hand: StartReplica starts
// broker id `id` in dir_/<name> (following `leader` unless it is empty) with `args`, and a
// failed test prints every replica's log.
class ReplicaGroupTest : public ::testing::Test {
 protected:
  std::unique_ptr<BrokerProcess> StartReplica(const std::string& name, int id,
                                              const std::string& leader,
                                              std::vector<std::string> args) {
    args.insert(args.end(), {"--broker-id", std::to_string(id), "--grpc-port", "0"});
    if (!leader.empty()) args.insert(args.end(), {"--replicate-from", leader});
    auto b = std::make_unique<BrokerProcess>(dir_.Join(name), args);
    EXPECT_TRUE(b->Start()) << name;
    logs_.push_back(b->log_path());
    return b;
  }
  void TearDown() override {
    if (!HasFailure()) return;
    for (const std::string& path : logs_) {
      std::ifstream in(path);
      std::cerr << "--- " << path << "\n" << std::string(std::istreambuf_iterator<char>(in), {});
    }
  }
  static std::string Address(const BrokerProcess& b) {
    return "127.0.0.1:" + std::to_string(b.port());
  }

  TempDir dir_;
  std::vector<std::string> logs_;
};

}  // namespace tokimq::testing
