// AdminClient: topic management, stats and operator requests (timer checkpoint, advancing a
// manual-clock broker). Returns the protocol messages directly (proto/tokimq.proto).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"

namespace tokimq::client {

class AdminClient {
 public:
  explicit AdminClient(ClientOptions options) : conn_(std::move(options)) {}

  // Zero fields take the broker's defaults (8 queues, 3 days max delay, default retention).
  // Cluster mode (docs/cluster.md): `brokers` places the topic on those brokers (empty: every
  // live broker); the answer carries the placement. A single broker refuses `brokers`.
  absl::StatusOr<proto::TopicConfig> CreateTopic(const proto::TopicConfig& topic,
                                                 const std::vector<std::string>& brokers = {});
  // Zero fields keep their value. Cluster mode: `add_brokers` extend the placement.
  absl::StatusOr<proto::TopicResponse> UpdateTopic(const proto::TopicConfig& topic,
                                                   const std::vector<std::string>& add_brokers = {});
  absl::Status DeleteTopic(const std::string& name);
  absl::StatusOr<std::vector<proto::TopicConfig>> ListTopics();
  absl::StatusOr<proto::TopicResponse> DescribeTopic(const std::string& name);
  // Every topic with its queues unless `request` pages (docs/protocol.md "stats").
  absl::StatusOr<proto::StatsResponse> Stats(const proto::StatsRequest& request = {});
  absl::Status TimerCheckpoint();
  // kFailedPrecondition unless the broker runs with --manual-clock. Returns the new time (ms).
  absl::StatusOr<int64_t> AdvanceClock(int64_t advance_ms);
  // Cluster mode (docs/cluster.md): a topic's route and the cluster's members and topics, as
  // the broker's etcd view has them. kFailedPrecondition from a single broker.
  absl::StatusOr<proto::RouteResponse> Route(const std::string& topic);
  absl::StatusOr<proto::ClusterStatusResponse> ClusterStatus();
  // This broker's place in its broker group: role, term, CommitLog end and, from a leader, each
  // follower's lag (issue 20; docs/cluster.md "Broker groups"). Any broker answers.
  absl::StatusOr<proto::GroupStatusResponse> GroupStatus();
  // Handshake info of the current connection (broker version, manual clock, time).
  absl::StatusOr<proto::HandshakeResponse> Ping();

  // Consumer group configuration (docs/ordering.md "Delivery order of a consumer group").
  // Create: kAlreadyExists when the group has a configuration. Update / Describe: kNotFound
  // when it has none. Each returns the stored configuration.
  absl::StatusOr<proto::GroupConfig> CreateGroup(const proto::GroupConfig& group);
  absl::StatusOr<proto::GroupConfig> UpdateGroup(const proto::GroupConfig& group);
  absl::StatusOr<proto::GroupConfig> DescribeGroup(const std::string& name);

  // Users and ACL rules (docs/security.md; the broker needs admin on "*" for each).
  // kAlreadyExists / kNotFound / kInvalidArgument as the broker's AuthStore answers.
  absl::Status CreateUser(const proto::CreateUserRequest& user);
  absl::Status DeleteUser(const std::string& access_key);
  absl::StatusOr<std::vector<proto::UserInfo>> ListUsers();
  absl::Status GrantAcl(const proto::AclRuleInfo& rule);
  absl::Status RevokeAcl(const std::string& access_key, const std::string& resource);
  // "" : every user's rules.
  absl::StatusOr<std::vector<proto::AclRuleInfo>> ListAcl(const std::string& access_key);

 private:
  ConnectionHolder conn_;
};

}  // namespace tokimq::client
