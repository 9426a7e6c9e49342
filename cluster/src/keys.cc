#include "cluster/keys.h"

#include "fmt/format.h"
#include "google/protobuf/util/json_util.h"

namespace tokimq::cluster {

std::string ClusterPrefix(const std::string& cluster) { return "/tokimq/" + cluster + "/"; }
std::string BrokersPrefix(const std::string& cluster) { return ClusterPrefix(cluster) + "brokers/"; }
std::string BrokerKey(const std::string& cluster, const std::string& broker) {
  return BrokersPrefix(cluster) + broker;
}
std::string ReplicasPrefix(const std::string& cluster, const std::string& broker) {
  return ClusterPrefix(cluster) + "replicas/" + broker + "/";
}
std::string ReplicaKey(const std::string& cluster, const std::string& broker, int32_t broker_id) {
  return ReplicasPrefix(cluster, broker) + std::to_string(broker_id);
}
std::string TopicsPrefix(const std::string& cluster) { return ClusterPrefix(cluster) + "topics/"; }
std::string TopicKey(const std::string& cluster, const std::string& topic) {
  return TopicsPrefix(cluster) + topic;
}

std::string EncodeValue(const google::protobuf::Message& msg) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(msg, &out, opts);
  return out;
}

absl::Status DecodeValue(std::string_view key, std::string_view json,
                         google::protobuf::Message* msg) {
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  auto s = google::protobuf::util::JsonStringToMessage(std::string(json), msg, opts);
  if (!s.ok()) {
    return absl::DataLossError(
        fmt::format("etcd key {}: value is not a {} ({})", key, msg->GetTypeName(), s.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace tokimq::cluster
