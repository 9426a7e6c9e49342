// ClusterNode: membership, the etcd view and topic admin of a broker in a cluster.
#include "broker/cluster_node.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "broker/broker.h"
#include "broker/metadata_store.h"
#include "cluster_auth.h"
#include "cluster_groups.h"
#include "cluster/cluster_view.h"
#include "cluster/etcd_client.h"
#include "cluster/keys.h"
#include "group_election.h"
#include "replication/replication_service.h"
#include "cluster/topic_catalog.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/status.h"
#include "fmt/format.h"
#include "proto/status.h"

namespace tokimq::broker {
namespace {

// The local TopicConfig of a cluster topic on a broker that hosts `queues` of its queues.
TopicConfig LocalConfig(const proto::TopicConfig& t, int32_t queues) {
  TopicConfig c;
  c.name = t.name();
  c.type = static_cast<TopicType>(static_cast<int>(t.type()));
  c.queues = queues;
  c.max_delay_ms = t.max_delay_ms();
  c.retention_ms = t.retention_ms();
  c.created_ms = t.created_ms();
  return c;
}

// Queues of `broker` in the topic's placement; 0 when it does not host it.
int32_t QueuesOn(const proto::TopicConfig& t, const std::string& broker) {
  for (const proto::TopicPlacement& p : t.placement()) {
    if (p.broker() == broker) return p.queues();
  }
  return 0;
}

// Validates a topic's settings with the broker's rules (queue count checked per placement).
absl::Status Validate(const proto::TopicConfig& t) {
  if (t.type() < proto::NORMAL || t.type() > proto::TRANSACTION) {
    return absl::InvalidArgumentError("topic type must be NORMAL, DELAY, FIFO or TRANSACTION");
  }
  for (const proto::TopicPlacement& p : t.placement()) {
    TOKIMQ_RETURN_IF_ERROR(ValidateTopicConfig(LocalConfig(t, p.queues())));
  }
  return ValidateTopicConfig(LocalConfig(t, t.queues()));
}

}  // namespace

ClusterNode::ClusterNode(Broker* broker, ClusterOptions options)
    : broker_(broker), options_(std::move(options)) {}

ClusterNode::~ClusterNode() { Stop(); }

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Create(Broker* broker,
                                                                 ClusterOptions options) {
  if (options.broker_name.empty()) {
    return absl::InvalidArgumentError("--cluster needs --broker-name");
  }
  // Broker and cluster names follow the topic name rule (they are etcd key parts, and the
  // routing client keeps "<broker>|<receipt handle>").
  if (absl::Status s = ValidateTopicName(options.broker_name); !s.ok()) {
    return absl::InvalidArgumentError("broker name: " + std::string(s.message()));
  }
  if (absl::Status s = ValidateTopicName(options.cluster); !s.ok()) {
    return absl::InvalidArgumentError("cluster name: " + std::string(s.message()));
  }
  if (options.etcd_endpoints.empty()) {
    return absl::InvalidArgumentError("--cluster needs --etcd-endpoints host:port[,...]");
  }
  std::unique_ptr<ClusterNode> node(new ClusterNode(broker, options));
  TOKIMQ_ASSIGN_OR_RETURN(node->etcd_, cluster::EtcdClient::Create(
                                           {options.etcd_endpoints, options.etcd_timeout_ms}));
  node->catalog_ = std::make_unique<cluster::TopicCatalog>(node->etcd_.get(), options.cluster);
  ClusterNode* self = node.get();
  node->view_ = std::make_unique<cluster::ClusterView>(
      node->etcd_.get(), options.cluster,
      [self](const std::map<std::string, proto::TopicConfig>& topics, bool snapshot) {
        self->Reconcile(topics, snapshot);
      });
  node->view_->Start();
  node->groups_ = std::make_unique<ClusterGroups>(broker, node->etcd_.get(), options.cluster);
  node->groups_->Start();
  node->auth_ = std::make_unique<ClusterAuth>(broker, node->etcd_.get(), options.cluster);
  node->auth_->Start();
  broker->SetRequestInterceptor(
      [self](const proto::Request& req, proto::Response* resp) { return self->Intercept(req, resp); });
  return node;
}

absl::Status ClusterNode::Start(std::string advertise, std::string advertise_grpc,
                                std::function<void(const absl::Status&)> on_conflict) {
  options_.advertise = std::move(advertise);
  options_.advertise_grpc = std::move(advertise_grpc);
  GroupElectionOptions g;
  g.cluster = options_.cluster;
  g.self.set_name(options_.broker_name);
  g.self.set_address(options_.advertise);
  g.self.set_grpc_address(options_.advertise_grpc);
  g.self.set_started_ms(broker_->clock()->NowMs());
  g.self.set_version("tokimq " TOKIMQ_VERSION);
  g.self.set_broker_id(broker_->options().broker_id);
  g.ttl_s = options_.lease_ttl_s;
  group_ = std::make_unique<GroupElection>(etcd_.get(), broker_->replication(), g);
  absl::Status s = group_->RegisterOnce();
  // The name may be held by this broker's own record from before a crash under another address
  // (a restart on a new port): it lapses within the lease TTL. Only a holder that outlives it
  // is another live broker: then on_conflict.
  const int64_t grace_ms = (options_.lease_ttl_s + 2) * 1000;
  // Real time even when the broker runs on a manual clock: the etcd lease lapses in real time.
  Clock* clock = SystemClock::Default();
  auto first_conflict = std::make_shared<std::optional<int64_t>>();
  auto conflict = [grace_ms, clock, first_conflict, f = std::move(on_conflict)](
                      const absl::Status& c) {
    const int64_t now = clock->NowMs();
    if (!first_conflict->has_value()) *first_conflict = now;
    if (now - **first_conflict >= grace_ms && f) f(c);
  };
  if (absl::IsAlreadyExists(s)) {
    conflict(s);
    TOKIMQ_LOG_WARN("cluster {}: {} — waiting up to {} s for a stale registration to lapse",
                    options_.cluster, std::string(s.message()), grace_ms / 1000);
  } else if (!s.ok()) {
    TOKIMQ_LOG_ERROR("cluster {}: etcd at {} not reachable ({}): serving as broker {} on {} and "
                     "registering as soon as etcd answers",
                     options_.cluster, fmt::join(options_.etcd_endpoints, ","), s.ToString(),
                     options_.broker_name, options_.advertise);
  }
  group_->Start(std::move(conflict));
  return absl::OkStatus();
}

void ClusterNode::Stop() {
  if (group_) group_->Stop(/*resign=*/true);
  if (view_) view_->Stop();
  if (groups_) groups_->Stop();
  if (auth_) auth_->Stop();
}

bool ClusterNode::registered() const { return group_ && group_->registered(); }

bool ClusterNode::Intercept(const proto::Request& req, proto::Response* resp) {
  absl::Status s;
  switch (req.body_case()) {
    case proto::Request::kCreateTopic:
      s = CreateTopic(req.create_topic(), resp);
      break;
    case proto::Request::kUpdateTopic:
      s = UpdateTopic(req.update_topic(), resp);
      break;
    case proto::Request::kDeleteTopic:
      s = DeleteTopic(req.delete_topic().name());
      if (s.ok()) resp->mutable_empty();
      break;
    case proto::Request::kListTopics:
      ListTopics(resp);
      break;
    case proto::Request::kDescribeTopic:
      if (!DescribeRemote(req.describe_topic().name(), resp)) return false;
      break;
    case proto::Request::kRoute: {
      absl::StatusOr<proto::RouteResponse> route = view_->Route(req.route().topic());
      s = route.status();
      if (s.ok()) {
        route->set_answered_by(options_.broker_name);
        const auto members = view_->Members();
        for (const proto::BrokerRoute& b : route->brokers()) {
          auto m = members.find(b.broker());
          if (m != members.end()) (*route->mutable_leader_terms())[b.broker()] = m->second.term();
        }
        *resp->mutable_route() = std::move(*route);
      }
      break;
    }
    case proto::Request::kClusterStatus:
      Status(resp->mutable_cluster_status());
      break;
    case proto::Request::kGroupStatus:
      GroupStatus(resp->mutable_group_status());
      break;
    case proto::Request::kRecall:
      return RouteRecall(req, resp);
    default:
      return groups_->Intercept(req, resp) || auth_->Intercept(req, resp);
  }
  if (!s.ok()) {
    resp->clear_body();
    wire::ToProto(s, resp->mutable_status());
  }
  return true;
}

absl::Status ClusterNode::CreateTopic(const proto::CreateTopicRequest& req,
                                      proto::Response* resp) {
  proto::TopicConfig t = req.topic();
  t.clear_placement();
  if (t.queues() == 0) t.set_queues(kDefaultQueues);
  if (t.max_delay_ms() == 0) t.set_max_delay_ms(kDefaultMaxDelayMs);
  if (t.retention_ms() == 0) t.set_retention_ms(broker_->options().default_retention_ms);
  t.set_created_ms(broker_->clock()->NowMs());
  const std::map<std::string, proto::BrokerRecord> members = view_->Members();
  std::vector<std::string> brokers(req.brokers().begin(), req.brokers().end());
  if (brokers.empty()) {
    for (const auto& [name, rec] : members) brokers.push_back(name);
  }
  if (brokers.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("cluster '{}' has no live broker to place topic '{}' on", options_.cluster,
                    t.name()));
  }
  std::set<std::string> seen;
  for (const std::string& b : brokers) {
    if (!members.count(b)) {
      return absl::InvalidArgumentError(
          fmt::format("broker '{}' is not a live member of cluster '{}'", b, options_.cluster));
    }
    if (!seen.insert(b).second) {
      return absl::InvalidArgumentError(fmt::format("broker '{}' named twice", b));
    }
    proto::TopicPlacement* p = t.add_placement();
    p->set_broker(b);
    p->set_queues(t.queues());
  }
  TOKIMQ_RETURN_IF_ERROR(Validate(t));
  TOKIMQ_RETURN_IF_ERROR(catalog_->Create(t).status());
  TOKIMQ_LOG_INFO("cluster {}: topic {} created on {} broker(s), {} queues each", options_.cluster,
                  t.name(), t.placement_size(), t.queues());
  ApplyLocal(t);
  *resp->mutable_topic()->mutable_topic() = t;
  return absl::OkStatus();
}

absl::Status ClusterNode::UpdateTopic(const proto::UpdateTopicRequest& req,
                                      proto::Response* resp) {
  const proto::TopicConfig& want = req.topic();
  const std::map<std::string, proto::BrokerRecord> members = view_->Members();
  for (const std::string& b : req.add_brokers()) {
    if (!members.count(b)) {
      return absl::InvalidArgumentError(
          fmt::format("broker '{}' is not a live member of cluster '{}'", b, options_.cluster));
    }
  }
  auto change = [&](proto::TopicConfig* t) -> absl::Status {
    if (want.type() != proto::TOPIC_TYPE_UNSPECIFIED && want.type() != t->type()) {
      return absl::InvalidArgumentError("the type of a topic cannot change");
    }
    if (want.queues() != 0) {
      if (want.queues() < t->queues()) {
        return absl::InvalidArgumentError(fmt::format(
            "queues cannot shrink ({} -> {}): messages sit in the higher queues", t->queues(),
            want.queues()));
      }
      t->set_queues(want.queues());
      for (proto::TopicPlacement& p : *t->mutable_placement()) {
        p.set_queues(std::max(p.queues(), want.queues()));
      }
    }
    if (want.max_delay_ms() != 0) t->set_max_delay_ms(want.max_delay_ms());
    if (want.retention_ms() != 0) t->set_retention_ms(want.retention_ms());
    for (const std::string& b : req.add_brokers()) {
      if (QueuesOn(*t, b) > 0) continue;  // already hosts it
      proto::TopicPlacement* p = t->add_placement();
      p->set_broker(b);
      p->set_queues(t->queues());
    }
    return Validate(*t);
  };
  TOKIMQ_ASSIGN_OR_RETURN(proto::TopicConfig t, catalog_->Update(want.name(), change));
  ApplyLocal(t);
  *resp->mutable_topic()->mutable_topic() = t;
  return absl::OkStatus();
}

absl::Status ClusterNode::DeleteTopic(const std::string& name) {
  TOKIMQ_RETURN_IF_ERROR(catalog_->Delete(name));
  std::lock_guard<std::mutex> lock(apply_mu_);
  absl::Status s = broker_->metadata()->DeleteTopic(name);
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  return absl::OkStatus();
}

void ClusterNode::ListTopics(proto::Response* resp) {
  proto::ListTopicsResponse* out = resp->mutable_list_topics();
  for (auto& [name, t] : view_->Topics()) *out->add_topics() = t;
}

void ClusterNode::GroupStatus(proto::GroupStatusResponse* out) {
  broker_->replication()->GroupStatus(out);
  out->set_broker_name(options_.broker_name);
}

bool ClusterNode::RouteRecall(const proto::Request& req, proto::Response* resp) {
  const std::string& handle = req.recall().recall_handle();
  const size_t bar = handle.find('|');
  if (bar == std::string::npos) return false;
  const std::string owner = handle.substr(0, bar);
  if (owner == options_.broker_name) {
    proto::Request local = req;
    local.mutable_recall()->set_recall_handle(handle.substr(bar + 1));
    broker_->Handle(local, resp);  // a plain handle now: the broker's own path
    return true;
  }
  const auto members = view_->Members();
  auto m = members.find(owner);
  const std::string where =
      m == members.end() ? "not live now" : fmt::format("at {}", m->second.address());
  resp->clear_body();
  wire::ToProto(absl::FailedPreconditionError(fmt::format(
                    "recall handle was issued by broker '{}' ({}), not by this broker '{}': send "
                    "the recall there (the routing clients and `tokimq recall` do)",
                    owner, where, options_.broker_name)),
                resp->mutable_status());
  return true;
}

bool ClusterNode::DescribeRemote(const std::string& name, proto::Response* resp) {
  std::optional<proto::TopicConfig> t = view_->Topic(name);
  if (!t) return false;  // the broker's answer (kNotFound, or a local-only topic)
  if (broker_->metadata()->GetTopic(name)) {
    // Hosted here: the broker fills the local queues; the placement is added by the caller's
    // next route request. Keep the broker's answer.
    return false;
  }
  *resp->mutable_topic()->mutable_topic() = *t;
  return true;
}

void ClusterNode::Status(proto::ClusterStatusResponse* out) {
  out->set_cluster(options_.cluster);
  out->set_answered_by(options_.broker_name);
  out->set_registered(registered());
  out->set_etcd_reachable(group_ && group_->etcd_reachable());
  out->set_etcd_revision(view_->revision());
  for (auto& [name, rec] : view_->Members()) *out->add_members() = rec;
  for (auto& [name, t] : view_->Topics()) *out->add_topics() = t;
  // Every group's replicas (not in the watched view: only status needs them).
  absl::StatusOr<cluster::RangeResult> replicas =
      etcd_->RangePrefix(cluster::ClusterPrefix(options_.cluster) + "replicas/");
  if (replicas.ok()) {
    for (const cluster::KeyValue& kv : replicas->kvs) {
      proto::BrokerRecord rec;
      if (cluster::DecodeValue(kv.key, kv.value, &rec).ok()) *out->add_replicas() = rec;
    }
  }
}

void ClusterNode::ApplyLocal(const proto::TopicConfig& t) {
  std::lock_guard<std::mutex> lock(apply_mu_);
  MetadataStore* md = broker_->metadata();
  const int32_t queues = QueuesOn(t, options_.broker_name);
  std::optional<TopicConfig> local = md->GetTopic(t.name());
  absl::Status s;
  if (queues == 0) {
    if (local) s = md->DeleteTopic(t.name());
  } else if (!local) {
    s = md->CreateTopic(LocalConfig(t, queues));
  } else if (TopicConfig want = LocalConfig(t, queues); !(want == *local)) {
    want.created_ms = local->created_ms;
    if (!(want == *local)) s = md->UpdateTopic(want);
  }
  if (!s.ok()) {
    TOKIMQ_LOG_ERROR("cluster {}: cannot apply topic {} locally: {}", options_.cluster, t.name(),
                     s.ToString());
  }
}

void ClusterNode::Reconcile(const std::map<std::string, proto::TopicConfig>& topics,
                            bool snapshot) {
  for (const auto& [name, t] : topics) ApplyLocal(t);
  if (topics.empty() && snapshot) {
    if (!broker_->metadata()->ListTopics().empty()) {
      TOKIMQ_LOG_WARN("cluster {}: etcd holds no topics; keeping this broker's local ones",
                      options_.cluster);
    }
    return;
  }
  std::lock_guard<std::mutex> lock(apply_mu_);
  for (const TopicConfig& local : broker_->metadata()->ListTopics()) {
    if (topics.count(local.name)) continue;
    TOKIMQ_LOG_INFO("cluster {}: topic {} is not in the cluster: deleted locally",
                    options_.cluster, local.name);
    (void)broker_->metadata()->DeleteTopic(local.name);
  }
}

}  // namespace tokimq::broker
