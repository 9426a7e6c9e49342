// Route, session and unsupported RPCs of MessagingServiceImpl.
#include <algorithm>

#include "broker/broker.h"
#include "common/clock.h"
#include "common/logging.h"
#include "error_texts.h"
#include "messaging_service.h"

namespace tokimq::rocketmq {
namespace {

constexpr int64_t kTopicCacheMs = 3000;
constexpr int kDefaultPublishAttempts = 3;
constexpr int kConsumerMaxAttempts = 16;  // the broker's default GroupPolicy::max_attempts
// The broker name of every queue when the endpoint is not clustered.
constexpr char kSingleBrokerName[] = "tokimq";

bool IsPerBrokerTopic(const std::string& name) {
  return name.rfind("%DLQ%", 0) == 0 || name.rfind("%RETRY%", 0) == 0;
}

const char* ClientTypeName(v2::ClientType t) {
  switch (t) {
    case v2::ClientType::PRODUCER: return "producer";
    case v2::ClientType::PUSH_CONSUMER: return "push consumer";
    case v2::ClientType::SIMPLE_CONSUMER: return "simple consumer";
    case v2::ClientType::PULL_CONSUMER: return "pull consumer";
    default: return "client";
  }
}

}  // namespace

std::string ClientIdOf(const grpc::ServerContext* ctx) {
  auto it = ctx->client_metadata().find("x-mq-client-id");
  if (it == ctx->client_metadata().end()) return "?";
  return std::string(it->second.data(), it->second.size());
}

MessagingServiceImpl::MessagingServiceImpl(broker::Broker* broker, GrpcEndpointOptions options)
    : broker_(broker),
      options_(std::move(options)),
      in_flight_(options_.dlq_cache_bytes),
      renewer_(broker_ != nullptr ? broker_->clock() : nullptr,
               RenewerOptionsFor(options_.default_invisible_ms, options_.auto_renew_max_ms)) {
  if (broker_ == nullptr) return;  // unit tests of the pure parts
  broker_->SetExternalCheckSink(
      [this](const proto::TransactionCheck& check) { return OfferCheck(check); });
  StartRenewal();
}

MessagingServiceImpl::~MessagingServiceImpl() {
  if (broker_ == nullptr) return;
  StopRenewal();
  broker_->SetExternalCheckSink(nullptr);
}

proto::Response MessagingServiceImpl::Call(const proto::Request& req) {
  proto::Response resp;
  broker_->Handle(req, &resp);
  return resp;
}

std::optional<proto::TopicConfig> MessagingServiceImpl::LookupTopic(const std::string& name,
                                                                    v2::Status* error) {
  if (name.empty()) {
    *error = MakeStatus(v2::Code::ILLEGAL_TOPIC, IllegalTopicText(name));
    return std::nullopt;
  }
  if (auto bad = TopicNameError(name)) {
    *error = *bad;
    return std::nullopt;
  }
  if (IsPerBrokerTopic(name)) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(proto::NORMAL);
    t.set_queues(1);
    return t;
  }
  const int64_t now = broker_->clock()->NowMs();
  {
    std::lock_guard<std::mutex> lock(topics_mu_);
    auto it = topics_.find(name);
    if (it != topics_.end() && now - it->second.fetched_ms < kTopicCacheMs &&
        now >= it->second.fetched_ms) {
      return it->second.config;
    }
  }
  proto::Request req;
  req.mutable_describe_topic()->set_name(name);
  proto::Response resp = Call(req);
  if (resp.has_status() && resp.status().code() != 0) {
    *error = StatusFromNative(resp, RpcKind::kRoute);
    UseRocketMqText(error, RpcKind::kRoute, name, "");
    std::lock_guard<std::mutex> lock(topics_mu_);
    topics_.erase(name);
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(topics_mu_);
  topics_[name] = CachedTopic{resp.topic().topic(), now};
  return resp.topic().topic();
}

v2::Endpoints MessagingServiceImpl::AdvertisedEndpoints(const v2::Endpoints& requested) const {
  // The client reached us at its access point; answering with it keeps every RPC on this
  // endpoint (a single broker, broker id 0).
  if (requested.addresses_size() > 0) return requested;
  v2::Endpoints e;
  e.set_scheme(v2::AddressScheme::IPv4);
  v2::Address* a = e.add_addresses();
  a->set_host(options_.address);
  a->set_port(options_.port);
  return e;
}

void MessagingServiceImpl::FillQueue(const proto::TopicConfig& topic, int32_t queue_id,
                                     const std::string& broker, const v2::Endpoints& endpoints,
                                     v2::MessageQueue* mq) const {
  mq->mutable_topic()->set_name(topic.name());
  mq->set_id(queue_id);
  mq->set_permission(v2::Permission::READ_WRITE);
  v2::Broker* b = mq->mutable_broker();
  b->set_name(broker);
  b->set_id(0);
  *b->mutable_endpoints() = endpoints;
  AddAcceptedTypes(topic.type(), mq);
}

std::optional<proto::RouteResponse> MessagingServiceImpl::LookupRoute(const std::string& name,
                                                                      v2::Status* error) {
  const int64_t now = broker_->clock()->NowMs();
  {
    std::lock_guard<std::mutex> lock(topics_mu_);
    auto it = routes_.find(name);
    if (it != routes_.end() && now - it->second.fetched_ms < kTopicCacheMs &&
        now >= it->second.fetched_ms) {
      return it->second.route;
    }
  }
  proto::RouteResponse route;
  proto::Request req;
  if (IsPerBrokerTopic(name)) {
    // Retry and DLQ topics live on each broker (the messages it holds): one queue everywhere.
    req.mutable_cluster_status();
    proto::Response resp = Call(req);
    if (resp.has_status() && resp.status().code() != 0) {
      *error = StatusFromNative(resp, RpcKind::kRoute);
      return std::nullopt;
    }
    route.set_cluster(resp.cluster_status().cluster());
    route.mutable_topic()->set_name(name);
    route.mutable_topic()->set_type(proto::NORMAL);
    route.mutable_topic()->set_queues(1);
    for (const proto::BrokerRecord& m : resp.cluster_status().members()) {
      proto::BrokerRoute* b = route.add_brokers();
      b->set_broker(m.name());
      b->set_address(m.address());
      b->set_grpc_address(m.grpc_address());
      b->set_queues(1);
      b->set_live(true);
    }
  } else {
    req.mutable_route()->set_topic(name);
    proto::Response resp = Call(req);
    if (resp.has_status() && resp.status().code() != 0) {
      *error = StatusFromNative(resp, RpcKind::kRoute);
      UseRocketMqText(error, RpcKind::kRoute, name, "");
      return std::nullopt;
    }
    route = resp.route();
  }
  std::lock_guard<std::mutex> lock(topics_mu_);
  routes_[name] = CachedRoute{route, now};
  return route;
}

std::optional<std::vector<GrpcBroker>> MessagingServiceImpl::ClusterBrokers(
    const std::string& topic, v2::Status* error) {
  std::optional<proto::RouteResponse> route = LookupRoute(topic, error);
  if (!route) return std::nullopt;
  std::vector<GrpcBroker> brokers = GrpcBrokersOf(*route);
  if (brokers.empty()) {
    *error = MakeStatus(v2::Code::NOT_FOUND,
                        "no live broker with a gRPC endpoint hosts topic '" + topic +
                            "' in cluster '" + route->cluster() + "' (tokimq cluster status)");
    return std::nullopt;
  }
  return brokers;
}

std::optional<v2::Status> MessagingServiceImpl::ForeignQueue(const v2::MessageQueue& mq) {
  const std::string& owner = mq.broker().name();
  if (!clustered() || owner.empty() || owner == options_.cluster_broker_name) return std::nullopt;
  v2::Status ignored;
  std::optional<proto::RouteResponse> route = LookupRoute(mq.topic().name(), &ignored);
  return ForeignQueueStatus(mq.topic().name(), mq.id(), owner, options_.cluster_broker_name,
                            route ? &*route : nullptr);
}

std::optional<v2::Status> MessagingServiceImpl::QueueRequestError(const std::string* group,
                                                                  const v2::MessageQueue& mq) {
  if (group != nullptr) {
    if (auto bad = GroupNameError(*group)) return bad;
  }
  if (auto bad = TopicNameError(mq.topic().name())) return bad;
  // Cluster mode: a queue of another broker is refused, never served from this one's queues.
  return ForeignQueue(mq);
}

grpc::Status MessagingServiceImpl::QueryRoute(grpc::ServerContext* ctx,
                                              const v2::QueryRouteRequest* req,
                                              v2::QueryRouteResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  if (auto denied = Authorize(who, {{broker::auth::Resource::Topic(req->topic().name()),
                                     broker::auth::kPub | broker::auth::kSub}})) {
    *resp->mutable_status() = *denied;
    return grpc::Status::OK;
  }
  v2::Status error;
  std::optional<proto::TopicConfig> topic = LookupTopic(req->topic().name(), &error);
  if (!topic) {
    *resp->mutable_status() = error;
    return grpc::Status::OK;
  }
  if (clustered()) {
    // Every live hosting broker under its own name and gRPC endpoint, queue ids from 0 on each
    // (docs/cluster.md "gRPC routing").
    std::optional<std::vector<GrpcBroker>> brokers = ClusterBrokers(req->topic().name(), &error);
    if (!brokers) {
      *resp->mutable_status() = error;
      return grpc::Status::OK;
    }
    for (const GrpcBroker& b : *brokers) {
      for (int32_t q = 0; q < b.queues; ++q) {
        FillQueue(*topic, q, b.name, b.endpoints, resp->add_message_queues());
      }
    }
    *resp->mutable_status() = OkStatus();
    return grpc::Status::OK;
  }
  const v2::Endpoints endpoints = AdvertisedEndpoints(req->endpoints());
  for (int32_t q = 0; q < std::max(1, topic->queues()); ++q) {
    FillQueue(*topic, q, kSingleBrokerName, endpoints, resp->add_message_queues());
  }
  *resp->mutable_status() = OkStatus();
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::Heartbeat(grpc::ServerContext* ctx,
                                             const v2::HeartbeatRequest* req,
                                             v2::HeartbeatResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  // Consumer groups are implicit in tokimq (created by the first receive), so there is nothing
  // to register; the heartbeat only proves the endpoint is alive.
  *resp->mutable_status() = OkStatus();
  return grpc::Status::OK;
}

bool MessagingServiceImpl::GroupIsOrderly(const v2::Settings& client) {
  if (!client.has_subscription()) return false;
  const std::string& group = client.subscription().group().name();
  if (group.empty() || GroupNameError(group)) return false;
  proto::Request req;
  req.mutable_describe_group()->set_name(group);
  proto::Response resp = Call(req);
  // No configuration (NOT_FOUND): the group is implicit and Concurrently, RocketMQ's default.
  return (!resp.has_status() || resp.status().code() == 0) &&
         resp.group().group().delivery_order() == proto::ORDERLY;
}

v2::Settings MessagingServiceImpl::AnswerSettings(const v2::Settings& client,
                                                  bool fifo_group) const {
  v2::Settings s = client;
  if (s.has_publishing()) {
    s.mutable_publishing()->set_max_body_size(options_.max_body_size);
    s.mutable_publishing()->set_validate_message_type(true);
    // Producers retry a failed send at once (RocketMQ's default); clients assert exponential.
    v2::RetryPolicy* rp = s.mutable_backoff_policy();
    if (rp->max_attempts() <= 0) rp->set_max_attempts(kDefaultPublishAttempts);
    if (!rp->has_exponential_backoff()) {
      v2::ExponentialBackoff* eb = rp->mutable_exponential_backoff();
      SetDurationMs(10, eb->mutable_initial());
      SetDurationMs(1000, eb->mutable_max());
      eb->set_multiplier(2);
    }
  } else if (s.has_subscription()) {
    v2::Subscription* sub = s.mutable_subscription();
    // `fifo` is the group's delivery order (RocketMQ: consumeMessageOrderly): for an Orderly
    // group the broker hands out one message per message group at a time, and the PushConsumer
    // consumes a group's messages one by one, retrying a failed one locally before the next
    // (docs/rocketmq-compat.md "FIFO").
    sub->set_fifo(fifo_group);
    sub->set_receive_batch_size(options_.receive_batch_size);
    int64_t poll = options_.long_polling_timeout_ms;
    if (sub->has_long_polling_timeout()) {
      poll = std::min(poll, DurationMs(sub->long_polling_timeout()));
    }
    SetDurationMs(poll, sub->mutable_long_polling_timeout());
    // NACKed messages come back after 1 s, 2 s, 4 s ... up to 1 min, then the DLQ after the
    // broker's max attempts.
    v2::RetryPolicy* rp = s.mutable_backoff_policy();
    rp->set_max_attempts(kConsumerMaxAttempts);
    v2::ExponentialBackoff* eb = rp->mutable_exponential_backoff();
    SetDurationMs(1000, eb->mutable_initial());
    SetDurationMs(60'000, eb->mutable_max());
    eb->set_multiplier(2);
  }
  return s;
}

grpc::Status MessagingServiceImpl::Telemetry(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v2::TelemetryCommand, v2::TelemetryCommand>* stream) {
  std::string who;
  if (Authenticate(ctx, &who)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "authentication failed");
  }
  const std::string client = ClientIdOf(ctx);
  // Writes come from this thread (settings answers) and from the broker's transaction check
  // thread (RecoverOrphanedTransactionCommand, through check_streams_): one at a time.
  std::mutex write_mu;
  auto write = [&](const v2::TelemetryCommand& c) {
    std::lock_guard<std::mutex> lock(write_mu);
    return stream->Write(c);
  };
  const uint64_t stream_id = check_streams_.Register(write);
  v2::TelemetryCommand cmd;
  bool subscriber = false;
  while (stream->Read(&cmd)) {
    if (!cmd.has_settings()) continue;  // answers to server commands (thread dumps, ...)
    subscriber = subscriber || cmd.settings().has_subscription();
    if (cmd.settings().has_publishing()) {
      std::set<std::string> topics;
      // Check-backs carry the half's body: only to a producer whose user may publish the topic.
      for (const auto& t : cmd.settings().publishing().topics()) {
        if (!Authorize(who, {{broker::auth::Resource::Topic(t.name()), broker::auth::kPub}})) {
          topics.insert(t.name());
        }
      }
      check_streams_.SetTopics(stream_id, std::move(topics));
    }
    v2::TelemetryCommand answer;
    *answer.mutable_status() = OkStatus();
    *answer.mutable_settings() =
        AnswerSettings(cmd.settings(), GroupIsOrderly(cmd.settings()));
    TOKIMQ_LOG_DEBUG("rocketmq: settings from {} {}", ClientTypeName(cmd.settings().client_type()),
                     client);
    if (!write(answer)) break;
  }
  check_streams_.Unregister(stream_id);
  // A consumer whose session ended (crashed, or shut down without NotifyClientTermination) will
  // not ack what it held: stop renewing its leases, as RocketMQ's proxy does for an offline
  // client, so they run out and the messages come back.
  if (subscriber) renewer_.ForgetClient(client);
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::QueryAssignment(grpc::ServerContext* ctx,
                                                   const v2::QueryAssignmentRequest* req,
                                                   v2::QueryAssignmentResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  if (auto denied = Authorize(
          who, {{broker::auth::Resource::Group(req->group().name()), broker::auth::kSub},
                {broker::auth::Resource::Topic(req->topic().name()), broker::auth::kSub}})) {
    *resp->mutable_status() = *denied;
    return grpc::Status::OK;
  }
  if (auto bad = GroupNameError(req->group().name())) {
    *resp->mutable_status() = *bad;
    return grpc::Status::OK;
  }
  v2::Status error;
  std::optional<proto::TopicConfig> topic = LookupTopic(req->topic().name(), &error);
  if (!topic) {
    *resp->mutable_status() = error;
    return grpc::Status::OK;
  }
  // Receives are served from all queues of the topic at once (lease-based "pop"), so a push
  // consumer gets one assignment with queue id -1 per broker, as RocketMQ's proxy does in pop
  // mode; in a cluster one per live hosting broker, at that broker's endpoint.
  if (clustered()) {
    std::optional<std::vector<GrpcBroker>> brokers = ClusterBrokers(req->topic().name(), &error);
    if (!brokers) {
      *resp->mutable_status() = error;
      return grpc::Status::OK;
    }
    for (const GrpcBroker& b : *brokers) {
      FillQueue(*topic, -1, b.name, b.endpoints,
                resp->add_assignments()->mutable_message_queue());
    }
  } else {
    FillQueue(*topic, -1, kSingleBrokerName, AdvertisedEndpoints(req->endpoints()),
              resp->add_assignments()->mutable_message_queue());
  }
  *resp->mutable_status() = OkStatus();
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::NotifyClientTermination(
    grpc::ServerContext* ctx, const v2::NotifyClientTerminationRequest* req,
    v2::NotifyClientTerminationResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  // Leases of a terminated client simply expire: stop renewing them (a push consumer that shut
  // down will not ack what it still held).
  renewer_.ForgetClient(ClientIdOf(ctx));
  *resp->mutable_status() = OkStatus();
  return grpc::Status::OK;
}

// --- Not supported: answered with a RocketMQ status so clients report a clear error. ---

grpc::Status MessagingServiceImpl::SyncLiteSubscription(
    grpc::ServerContext* ctx, const v2::SyncLiteSubscriptionRequest* req,
    v2::SyncLiteSubscriptionResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  *resp->mutable_status() =
      MakeStatus(v2::Code::UNSUPPORTED, "lite topics are not supported by tokimq");
  return grpc::Status::OK;
}

}  // namespace tokimq::rocketmq
