// The etcd key layout of a tokimq cluster and the value encoding (docs/cluster.md "etcd keys"):
//
//   /tokimq/<cluster>/brokers/<broker name>  BrokerRecord of the group's elected leader, under
//                                            its election lease; term = the key's mod_revision
//   /tokimq/<cluster>/replicas/<name>/<id>   BrokerRecord of each replica of group <name>
//   /tokimq/<cluster>/topics/<topic name>    ClusterTopic (settings + placement)
//
// Values are protobuf messages of proto/tokimq.proto in protobuf's JSON mapping, so that
// `etcdctl get --prefix /tokimq/` shows them readably; unknown JSON fields are ignored on
// decode (a newer broker may add fields). Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace tokimq::cluster {

std::string ClusterPrefix(const std::string& cluster);  // "/tokimq/<cluster>/"
std::string BrokersPrefix(const std::string& cluster);
std::string BrokerKey(const std::string& cluster, const std::string& broker);
// Issue 20: the replicas of broker group `broker` (leader_election.h).
std::string ReplicasPrefix(const std::string& cluster, const std::string& broker);
std::string ReplicaKey(const std::string& cluster, const std::string& broker, int32_t broker_id);
std::string TopicsPrefix(const std::string& cluster);
std::string TopicKey(const std::string& cluster, const std::string& topic);

// JSON of `msg` (compact). Never fails for the messages used here.
std::string EncodeValue(const google::protobuf::Message& msg);
// kDataLoss naming `key` when the value is not JSON of that message.
absl::Status DecodeValue(std::string_view key, std::string_view json,
                         google::protobuf::Message* msg);

}  // namespace tokimq::cluster
