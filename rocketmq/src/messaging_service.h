// MessagingServiceImpl: apache.rocketmq.v2.MessagingService over Broker::Handle (synchronous
// gRPC service; every method runs on a gRPC worker thread and may block in Handle).
//
// The RPCs are split by concern: route_rpcs.cc (QueryRoute, Heartbeat, Telemetry,
// QueryAssignment, NotifyClientTermination and the unsupported ones), send_rpcs.cc (SendMessage,
// RecallMessage), consume_rpcs.cc (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
// ForwardMessageToDeadLetterQueue). docs/rocketmq-compat.md describes each mapping.
//
// Ownership: borrows the Broker (must outlive the server). Thread-safety: all methods may run
// concurrently; the topic cache and the in-flight cache lock their own mutexes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <vector>

#include "apache/rocketmq/v2/service.grpc.pb.h"
#include "check_streams.h"
#include "cluster_routes.h"
#include "broker/auth/permissions.h"
#include "convert.h"
#include "in_flight_cache.h"
#include "recall_forwarder.h"
#include "lease_renewer.h"
#include "proto/tokimq.pb.h"
#include "rocketmq/grpc_endpoint.h"

namespace tokimq::broker {
class Broker;
}

namespace tokimq::rocketmq {

// The client id of a call (metadata x-mq-client-id), "?" without one.
std::string ClientIdOf(const grpc::ServerContext* ctx);

class MessagingServiceImpl final : public v2::MessagingService::Service {
 public:
  MessagingServiceImpl(broker::Broker* broker, GrpcEndpointOptions options);
  // Unhooks the transaction check sink from the broker and stops the lease renewal thread.
  ~MessagingServiceImpl() override;

  grpc::Status QueryRoute(grpc::ServerContext* ctx, const v2::QueryRouteRequest* req,
                          v2::QueryRouteResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v2::HeartbeatRequest* req,
                         v2::HeartbeatResponse* resp) override;
  grpc::Status SendMessage(grpc::ServerContext* ctx, const v2::SendMessageRequest* req,
                           v2::SendMessageResponse* resp) override;
  grpc::Status QueryAssignment(grpc::ServerContext* ctx, const v2::QueryAssignmentRequest* req,
                               v2::QueryAssignmentResponse* resp) override;
  grpc::Status ReceiveMessage(grpc::ServerContext* ctx, const v2::ReceiveMessageRequest* req,
                              grpc::ServerWriter<v2::ReceiveMessageResponse>* writer) override;
  grpc::Status AckMessage(grpc::ServerContext* ctx, const v2::AckMessageRequest* req,
                          v2::AckMessageResponse* resp) override;
  grpc::Status ForwardMessageToDeadLetterQueue(
      grpc::ServerContext* ctx, const v2::ForwardMessageToDeadLetterQueueRequest* req,
      v2::ForwardMessageToDeadLetterQueueResponse* resp) override;
  grpc::Status PullMessage(grpc::ServerContext* ctx, const v2::PullMessageRequest* req,
                           grpc::ServerWriter<v2::PullMessageResponse>* writer) override;
  grpc::Status UpdateOffset(grpc::ServerContext* ctx, const v2::UpdateOffsetRequest* req,
                            v2::UpdateOffsetResponse* resp) override;
  grpc::Status GetOffset(grpc::ServerContext* ctx, const v2::GetOffsetRequest* req,
                         v2::GetOffsetResponse* resp) override;
  grpc::Status QueryOffset(grpc::ServerContext* ctx, const v2::QueryOffsetRequest* req,
                           v2::QueryOffsetResponse* resp) override;
  grpc::Status EndTransaction(grpc::ServerContext* ctx, const v2::EndTransactionRequest* req,
                              v2::EndTransactionResponse* resp) override;
  grpc::Status Telemetry(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v2::TelemetryCommand, v2::TelemetryCommand>* stream) override;
  grpc::Status NotifyClientTermination(grpc::ServerContext* ctx,
                                       const v2::NotifyClientTerminationRequest* req,
                                       v2::NotifyClientTerminationResponse* resp) override;
  grpc::Status ChangeInvisibleDuration(grpc::ServerContext* ctx,
                                       const v2::ChangeInvisibleDurationRequest* req,
                                       v2::ChangeInvisibleDurationResponse* resp) override;
  grpc::Status RecallMessage(grpc::ServerContext* ctx, const v2::RecallMessageRequest* req,
                             v2::RecallMessageResponse* resp) override;
  grpc::Status SyncLiteSubscription(grpc::ServerContext* ctx,
                                    const v2::SyncLiteSubscriptionRequest* req,
                                    v2::SyncLiteSubscriptionResponse* resp) override;

  // The answer to a client's Settings in the telemetry handshake (exposed for tests).
  // `fifo_group`: what a subscriber is told in Subscription.fifo (see GroupIsOrderly).
  v2::Settings AnswerSettings(const v2::Settings& client, bool fifo_group = false) const;

  // Validates one message of a SendMessage request and appends its native entry (exposed for
  // tests; uses no broker state). `now` in ms on the broker's clock.
  v2::Status PrepareSendEntry(const v2::Message& m, const proto::TopicConfig& topic, int64_t now,
                              proto::SendEntry* out) const;

  // Transactions (tx_rpcs.cc). The transaction id handed to RocketMQ clients carries the native
  // message id: "<native message id>:<native transaction id>" (a client's EndTransaction names
  // its own message id). Decode: false without the separator.
  static std::string EncodeTransactionId(const std::string& native_message_id,
                                         const std::string& native_transaction_id);
  static bool DecodeTransactionId(const std::string& id, std::string* native_message_id,
                                  std::string* native_transaction_id);
  // The RecoverOrphanedTransactionCommand for a native check (the message with its full system
  // properties, body_digest included: the Node.js client ignores a command without one).
  static v2::TelemetryCommand RecoverCommand(const proto::TransactionCheck& check);

 private:
  // One native request through Broker::Handle.
  proto::Response Call(const proto::Request& req);

  // Authentication and authorization (rpc_auth.cc, docs/security.md). With the broker's auth
  // off they admit everything. Authenticate: the caller's access key from the `authorization`
  // and `x-mq-date-time` headers (broker/auth/rocketmq_signature.h), or the UNAUTHORIZED
  // status to answer. Authorize: the FORBIDDEN status to answer when the user misses one of
  // the requirements. CallAs: Call after authorizing `req` by the native permission table
  // (a refusal comes back as a native kPermissionDenied response, which maps to FORBIDDEN).
  std::optional<v2::Status> Authenticate(const grpc::ServerContext* ctx,
                                         std::string* access_key) const;
  std::optional<v2::Status> Authorize(
      const std::string& access_key,
      const std::vector<broker::auth::Requirement>& requirements) const;
  proto::Response CallAs(const std::string& access_key, const proto::Request& req);
  // Authenticate for an RPC whose response carries a status: false (status filled) if refused.
  template <typename Response>
  bool Admit(const grpc::ServerContext* ctx, std::string* access_key, Response* resp) const {
    std::optional<v2::Status> refused = Authenticate(ctx, access_key);
    if (refused) *resp->mutable_status() = *refused;
    return !refused.has_value();
  }

  // The native topic config of `name` (cached for a few seconds), or the v2 status to answer.
  // "%DLQ%..." / "%RETRY%..." topics resolve to one NORMAL queue.
  std::optional<proto::TopicConfig> LookupTopic(const std::string& name, v2::Status* error);

  // A queue of `broker` (broker id 0) as a RocketMQ message queue at `endpoints`.
  void FillQueue(const proto::TopicConfig& topic, int32_t queue_id, const std::string& broker,
                 const v2::Endpoints& endpoints, v2::MessageQueue* mq) const;
  v2::Endpoints AdvertisedEndpoints(const v2::Endpoints& requested) const;

  // Cluster mode (options_.cluster_broker_name set; cluster_routes.h). The native route of
  // `topic` (cached like topics); for "%DLQ%..." / "%RETRY%..." (per-broker topics) one queue on
  // every live member. nullopt with *error for a topic the cluster does not have or when the
  // broker cannot answer.
  bool clustered() const { return !options_.cluster_broker_name.empty(); }
  std::optional<proto::RouteResponse> LookupRoute(const std::string& topic, v2::Status* error);
  // The live brokers of `topic` gRPC clients can reach (QueryRoute / QueryAssignment), or the
  // status to answer when there is none.
  std::optional<std::vector<GrpcBroker>> ClusterBrokers(const std::string& topic,
                                                        v2::Status* error);
  // The NOT_FOUND status for a request naming a queue of another broker; nullopt when `mq`
  // names this broker, no broker, or the endpoint is not clustered.
  std::optional<v2::Status> ForeignQueue(const v2::MessageQueue& mq);
  // The checks every queue-addressed consume RPC (ReceiveMessage, PullMessage, UpdateOffset,
  // GetOffset, QueryOffset) makes first, in this order: the group's name (GroupNameError;
  // skipped when `group` is nullptr: QueryOffset has none), the topic's name (TopicNameError),
  // the queue's broker (ForeignQueue). The status to answer, or nullopt when all pass.
  std::optional<v2::Status> QueueRequestError(const std::string* group, const v2::MessageQueue& mq);

  // A native Recall (handle without the owner's name, topic set) for broker `owner`, sent to
  // it as user `who` (recall_forwarder.h); the answer as a native response.
  proto::Response ForwardRecall(const std::string& owner, const std::string& who,
                                const proto::Request& native);

  // True when a subscriber's group is stored with delivery order Orderly (native
  // DescribeGroup; `tokimq group create --orderly`): RocketMQ makes orderliness a property of
  // the group (consumeMessageOrderly), and the PushConsumer switches to its FIFO consume
  // service on Subscription.fifo. A group without a configuration is Concurrently.
  bool GroupIsOrderly(const v2::Settings& client);

  // A check of the broker for a RocketMQ producer of the topic (the broker's external sink).
  bool OfferCheck(const proto::TransactionCheck& check);

  // Server-side lease renewal (auto_renew.cc): the thread running renewer_.RunOnce every
  // period, the native renewal it calls, and the acks of AckMessage through the renewer (a
  // handle renewed between Resolve and the ack is acked again with its new handle).
  void StartRenewal();
  void StopRenewal();
  absl::StatusOr<std::string> RenewNative(const std::string& group, const std::string& handle,
                                          int64_t invisible_ms);
  proto::Response AckResolved(const std::string& who, const std::string& group,
                              const std::vector<std::string>& client_handles);

  broker::Broker* const broker_;
  const GrpcEndpointOptions options_;
  InFlightCache in_flight_;
  LeaseRenewer renewer_;
  std::mutex renew_mu_;
  std::condition_variable renew_cv_;
  bool renew_stop_ = false;  // renew_mu_
  std::thread renew_thread_;
  CheckStreams check_streams_;
  RecallForwarder forwarder_;  // cluster mode: RecallMessage for another broker

  struct CachedTopic {
    proto::TopicConfig config;
    int64_t fetched_ms = 0;
  };
  struct CachedRoute {
    proto::RouteResponse route;
    int64_t fetched_ms = 0;
  };
  std::mutex topics_mu_;
  std::map<std::string, CachedTopic> topics_;   // topics_mu_
  std::map<std::string, CachedRoute> routes_;   // topics_mu_ (cluster mode)
};

}  // namespace tokimq::rocketmq
