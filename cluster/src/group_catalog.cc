#include "cluster/group_catalog.h"

#include "cluster/keys.h"
#include "common/logging.h"
#include "common/status.h"
#include "fmt/format.h"

namespace tokimq::cluster {

std::string ConsumerGroupsPrefix(const std::string& cluster) {
  return ClusterPrefix(cluster) + "consumer_groups/";
}
std::string ConsumerGroupKey(const std::string& cluster, const std::string& group) {
  return ConsumerGroupsPrefix(cluster) + group;
}

GroupCatalog::~GroupCatalog() { Stop(); }

absl::StatusOr<int64_t> GroupCatalog::Create(const proto::GroupConfig& group) {
  const std::string key = ConsumerGroupKey(cluster_, group.name());
  EtcdTxn txn;
  txn.compares.push_back({key, EtcdTxn::Compare::Kind::kCreateRevisionEquals, 0});
  txn.puts.push_back({key, EncodeValue(group), 0});
  TOKIMQ_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(txn));
  if (!r.succeeded) {
    return absl::AlreadyExistsError(
        fmt::format("consumer group '{}' already has a configuration", group.name()));
  }
  return r.revision;
}

absl::StatusOr<proto::GroupConfig> GroupCatalog::Update(
    const std::string& name, const std::function<absl::Status(proto::GroupConfig*)>& change) {
  const std::string key = ConsumerGroupKey(cluster_, name);
  for (int attempt = 0; attempt < 8; ++attempt) {
    TOKIMQ_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, etcd_->Get(key));
    if (!kv) {
      return absl::NotFoundError(
          fmt::format("consumer group '{}' has no configuration in the cluster", name));
    }
    proto::GroupConfig value;
    TOKIMQ_RETURN_IF_ERROR(DecodeValue(key, kv->value, &value));
    TOKIMQ_RETURN_IF_ERROR(change(&value));
    EtcdTxn txn;
    txn.compares.push_back({key, EtcdTxn::Compare::Kind::kModRevisionEquals, kv->mod_revision});
    txn.puts.push_back({key, EncodeValue(value), 0});
    TOKIMQ_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(txn));
    if (r.succeeded) return value;
  }
  return absl::AbortedError(fmt::format("consumer group '{}': too many concurrent updates", name));
}

void GroupCatalog::Watch(Listener on_groups) {
  if (watcher_) return;
  on_groups_ = std::move(on_groups);
  watcher_ = etcd_->WatchPrefix(ConsumerGroupsPrefix(cluster_),
                                [this](const WatchBatch& b) { Apply(b); });
}

void GroupCatalog::Stop() {
  if (watcher_) watcher_->Stop();
}

std::map<std::string, proto::GroupConfig> GroupCatalog::Groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_;
}

void GroupCatalog::Apply(const WatchBatch& batch) {
  const std::string prefix = ConsumerGroupsPrefix(cluster_);
  std::map<std::string, proto::GroupConfig> after;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (batch.snapshot) groups_.clear();
    for (const WatchEvent& e : batch.events) {
      const std::string name = e.kv.key.substr(prefix.size());
      proto::GroupConfig g;
      if (e.type != WatchEvent::Type::kPut) {
        groups_.erase(name);
      } else if (absl::Status s = DecodeValue(e.kv.key, e.kv.value, &g); s.ok()) {
        groups_[name] = g;
      } else {
        TOKIMQ_LOG_WARN("{}", s.ToString());
      }
    }
    after = groups_;
  }
  if (on_groups_) on_groups_(after, batch.snapshot);
}

}  // namespace tokimq::cluster
