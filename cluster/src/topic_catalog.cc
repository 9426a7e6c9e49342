#include "cluster/topic_catalog.h"

#include "cluster/keys.h"
#include "common/status.h"
#include "fmt/format.h"

namespace tokimq::cluster {

absl::StatusOr<int64_t> TopicCatalog::Create(const proto::TopicConfig& topic) {
  const std::string key = TopicKey(cluster_, topic.name());
  proto::ClusterTopic value;
  *value.mutable_topic() = topic;
  EtcdTxn txn;
  txn.compares.push_back({key, EtcdTxn::Compare::Kind::kCreateRevisionEquals, 0});
  txn.puts.push_back({key, EncodeValue(value), 0});
  TOKIMQ_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(txn));
  if (!r.succeeded) {
    return absl::AlreadyExistsError(fmt::format("topic '{}' already exists", topic.name()));
  }
  return r.revision;
}

absl::StatusOr<proto::TopicConfig> TopicCatalog::Update(
    const std::string& name, const std::function<absl::Status(proto::TopicConfig*)>& change) {
  const std::string key = TopicKey(cluster_, name);
  for (int attempt = 0; attempt < 8; ++attempt) {
    TOKIMQ_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, etcd_->Get(key));
    if (!kv) return absl::NotFoundError(fmt::format("topic '{}' does not exist", name));
    proto::ClusterTopic value;
    TOKIMQ_RETURN_IF_ERROR(DecodeValue(key, kv->value, &value));
    TOKIMQ_RETURN_IF_ERROR(change(value.mutable_topic()));
    EtcdTxn txn;
    txn.compares.push_back({key, EtcdTxn::Compare::Kind::kModRevisionEquals, kv->mod_revision});
    txn.puts.push_back({key, EncodeValue(value), 0});
    TOKIMQ_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(txn));
    if (r.succeeded) return value.topic();
  }
  return absl::AbortedError(fmt::format("topic '{}': too many concurrent updates", name));
}

absl::Status TopicCatalog::Delete(const std::string& name) {
  TOKIMQ_ASSIGN_OR_RETURN(int64_t deleted, etcd_->Delete(TopicKey(cluster_, name)));
  if (deleted == 0) return absl::NotFoundError(fmt::format("topic '{}' does not exist", name));
  return absl::OkStatus();
}

}  // namespace tokimq::cluster
