#include "cluster/cluster_view.h"

#include "cluster/keys.h"
#include "common/logging.h"
#include "fmt/format.h"

namespace tokimq::cluster {

ClusterView::ClusterView(EtcdClient* etcd, std::string cluster, TopicsListener on_topics)
    : etcd_(etcd), cluster_(std::move(cluster)), on_topics_(std::move(on_topics)) {}

ClusterView::~ClusterView() { Stop(); }

void ClusterView::Start() {
  watcher_ = etcd_->WatchPrefix(ClusterPrefix(cluster_), [this](const WatchBatch& b) { Apply(b); });
}

void ClusterView::Stop() {
  if (watcher_) watcher_->Stop();
}

bool ClusterView::loaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_;
}

bool ClusterView::WaitLoaded(int64_t timeout_ms) const {
  std::unique_lock<std::mutex> lock(mu_);
  return loaded_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return loaded_; });
}

void ClusterView::Apply(const WatchBatch& batch) {
  const std::string brokers = BrokersPrefix(cluster_);
  const std::string topics = TopicsPrefix(cluster_);
  std::map<std::string, proto::TopicConfig> topics_after;
  bool topics_changed = batch.snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (batch.snapshot) {
      members_.clear();
      topics_.clear();
    }
    for (const WatchEvent& e : batch.events) {
      const std::string& key = e.kv.key;
      const bool put = e.type == WatchEvent::Type::kPut;
      if (key.rfind(brokers, 0) == 0) {
        const std::string name = key.substr(brokers.size());
        proto::BrokerRecord rec;
        if (!put) {
          members_.erase(name);
        } else if (absl::Status s = DecodeValue(key, e.kv.value, &rec); s.ok()) {
          rec.set_term(e.kv.mod_revision);  // the group's term (leader_election.h)
          members_[name] = rec;
        } else {
          TOKIMQ_LOG_WARN("{}", s.ToString());
        }
      } else if (key.rfind(topics, 0) == 0) {
        topics_changed = true;
        const std::string name = key.substr(topics.size());
        proto::ClusterTopic t;
        if (!put) {
          topics_.erase(name);
        } else if (absl::Status s = DecodeValue(key, e.kv.value, &t); s.ok()) {
          topics_[name] = t.topic();
        } else {
          TOKIMQ_LOG_WARN("{}", s.ToString());
        }
      }
    }
    revision_ = batch.revision;
    loaded_ = true;
    if (topics_changed) topics_after = topics_;
  }
  loaded_cv_.notify_all();
  if (topics_changed && on_topics_) on_topics_(topics_after, batch.snapshot);
}

std::map<std::string, proto::BrokerRecord> ClusterView::Members() const {
  std::lock_guard<std::mutex> lock(mu_);
  return members_;
}

std::optional<proto::TopicConfig> ClusterView::Topic(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = topics_.find(name);
  if (it == topics_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, proto::TopicConfig> ClusterView::Topics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return topics_;
}

int64_t ClusterView::revision() const {
  std::lock_guard<std::mutex> lock(mu_);
  return revision_;
}

absl::StatusOr<proto::RouteResponse> ClusterView::Route(const std::string& topic) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) {
    // A broker started (or restarted itself after a demotion) while etcd is unreachable knows
    // no topic yet: "does not exist" would be wrong, and kUnavailable is retried by clients.
    return absl::UnavailableError(fmt::format(
        "cluster '{}': this broker has not read the topic catalog from etcd yet; retry", cluster_));
  }
  auto it = topics_.find(topic);
  if (it == topics_.end()) {
    return absl::NotFoundError(
        fmt::format("topic '{}' does not exist in cluster '{}'", topic, cluster_));
  }
  proto::RouteResponse out;
  *out.mutable_topic() = it->second;
  out.set_cluster(cluster_);
  out.set_etcd_revision(revision_);
  for (const proto::TopicPlacement& p : it->second.placement()) {
    proto::BrokerRoute* r = out.add_brokers();
    r->set_broker(p.broker());
    r->set_queues(p.queues());
    auto m = members_.find(p.broker());
    if (m != members_.end()) {
      r->set_live(true);
      r->set_address(m->second.address());
      r->set_grpc_address(m->second.grpc_address());
    }
  }
  return out;
}

}  // namespace tokimq::cluster
