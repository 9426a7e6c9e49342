// Broker::Handle and the per-request handlers.
#include <algorithm>

#include "broker/broker.h"
#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "common/coding.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/message_limits.h"
#include "common/metrics.h"
#include "common/names.h"
#include "common/status.h"
#include "disk_watermark.h"
#include "fmt/format.h"
#include "proto/duration.h"
#include "proto/framing.h"
#include "proto/status.h"
#include "receive_encoder.h"
#include "replication/replication_service.h"
#include "retention_task.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker {
namespace {

void ToProtoTopic(const TopicConfig& c, proto::TopicConfig* out) {
  out->set_name(c.name);
  out->set_type(static_cast<proto::TopicType>(static_cast<int>(c.type)));
  out->set_queues(c.queues);
  out->set_max_delay_ms(c.max_delay_ms);
  out->set_retention_ms(c.retention_ms);
  out->set_created_ms(c.created_ms);
}

absl::StatusOr<TopicConfig> FromProtoTopic(const proto::TopicConfig& p) {
  TopicConfig c;
  c.name = p.name();
  if (p.type() < proto::NORMAL || p.type() > proto::TRANSACTION) {
    return absl::InvalidArgumentError("topic type must be NORMAL, DELAY, FIFO or TRANSACTION");
  }
  c.type = static_cast<TopicType>(static_cast<int>(p.type()));
  c.queues = p.queues() == 0 ? kDefaultQueues : p.queues();
  c.max_delay_ms = p.max_delay_ms() == 0 ? kDefaultMaxDelayMs : p.max_delay_ms();
  c.retention_ms = p.retention_ms();
  return c;
}

// Sets the empty body that says "done" when `s` is OK; returns `s`.
absl::Status EmptyIfOk(absl::Status s, proto::Response* resp) {
  if (s.ok()) resp->mutable_empty();
  return s;
}

// Requests a follower refuses: they write to the CommitLog or to consumer state, which only the
// leader of the group changes (docs/replication.md).
bool RefusedOnFollower(proto::Request::BodyCase c) {
  switch (c) {
    case proto::Request::kSend:
    case proto::Request::kRecall:
    case proto::Request::kReceive:
    case proto::Request::kAck:
    case proto::Request::kChangeInvisibleDuration:
    case proto::Request::kNack:
    case proto::Request::kTimerCheckpoint:
    case proto::Request::kEndTransaction:
    case proto::Request::kPollTransactionChecks:
    case proto::Request::kUpdateOffset:
      return true;
    default:
      return false;
  }
}

}  // namespace

void Broker::Handle(const proto::Request& req, proto::Response* resp) {
  resp->set_id(req.id());
  if (interceptor_ && interceptor_(req, resp)) return;  // cluster mode: cluster_node.h
  absl::Status s;
  if (RefusedOnFollower(req.body_case())) s = replication_->CheckWritable();
  if (s.ok()) s = Dispatch(req, resp);
  if (!s.ok()) {
    resp->clear_body();
    wire::ToProto(s, resp->mutable_status());
  }
}

absl::Status Broker::Dispatch(const proto::Request& req, proto::Response* resp) {
  switch (req.body_case()) {
    case proto::Request::kReplicatePull:
      return replication_->HandlePull(req.replicate_pull(), resp->mutable_replicate_pull());
    case proto::Request::kReplicationRole:
      return replication_->HandleRole(req.replication_role(), resp->mutable_replication_role());
    case proto::Request::kGroupStatus:  // cluster mode: ClusterNode adds the broker name
      replication_->GroupStatus(resp->mutable_group_status());
      return absl::OkStatus();
    case proto::Request::kHandshake:
      return HandleHandshake(req.handshake(), resp);
    case proto::Request::kCreateTopic:
      return HandleCreateTopic(req.create_topic(), resp);
    case proto::Request::kUpdateTopic:
      return HandleUpdateTopic(req.update_topic(), resp);
    case proto::Request::kDeleteTopic:
      return EmptyIfOk(metadata_->DeleteTopic(req.delete_topic().name()), resp);
    case proto::Request::kListTopics:
      return HandleListTopics(resp);
    case proto::Request::kDescribeTopic:
      return HandleDescribeTopic(req.describe_topic().name(), resp);
    case proto::Request::kSend:
      return HandleSendReplicated(req.send(), resp->mutable_send());
    case proto::Request::kRecall:
      return EmptyIfOk(HandleRecall(req.recall()), resp);
    case proto::Request::kReceive:
      return HandleReceive(req.receive(), resp->mutable_receive());
    case proto::Request::kAck:
      return HandleAck(req.ack(), resp->mutable_ack());
    case proto::Request::kChangeInvisibleDuration:
      return HandleChangeInvisibleDuration(req.change_invisible_duration(), resp);
    case proto::Request::kNack:
      return EmptyIfOk(HandleNack(req.nack()), resp);
    case proto::Request::kStats:
      return HandleStats(req.stats(), resp->mutable_stats());
    case proto::Request::kAdvanceClock:
      return HandleAdvanceClock(req.advance_clock(), resp);
    case proto::Request::kTimerCheckpoint:
      return EmptyIfOk(timers_->Checkpoint(), resp);
    case proto::Request::kEndTransaction:
      return EmptyIfOk(HandleEndTransaction(req.end_transaction()), resp);
    case proto::Request::kPollTransactionChecks:
      return HandlePollTransactionChecks(req.poll_transaction_checks(),
                                         resp->mutable_transaction_checks());
    case proto::Request::kAuthenticate:
      return absl::FailedPreconditionError("authenticate is answered by the network server");
    case proto::Request::kCreateUser:
    case proto::Request::kDeleteUser:
    case proto::Request::kListUsers:
    case proto::Request::kGrantAcl:
    case proto::Request::kRevokeAcl:
    case proto::Request::kListAcl:
      return HandleAuthAdmin(req, resp);
    case proto::Request::kPull:
      return HandlePull(req.pull(), resp->mutable_pull());
    case proto::Request::kGetOffset:
      return HandleGetOffset(req.get_offset(), resp->mutable_offset());
    case proto::Request::kUpdateOffset:
      return EmptyIfOk(HandleUpdateOffset(req.update_offset()), resp);
    case proto::Request::kQueryOffset:
      return HandleQueryOffset(req.query_offset(), resp->mutable_offset());
    case proto::Request::kCreateGroup:
    case proto::Request::kUpdateGroup:
    case proto::Request::kDescribeGroup:
      return HandleGroupAdmin(req, resp);
    case proto::Request::kRoute:
    case proto::Request::kClusterStatus:
      return absl::FailedPreconditionError(
          "this broker is a single node, not in a cluster (start it with --cluster)");
    case proto::Request::BODY_NOT_SET:
      break;
  }
  return absl::UnimplementedError("unknown or empty request");
}

absl::Status Broker::HandleHandshake(const proto::HandshakeRequest& req, proto::Response* resp) {
  if (req.protocol_version() != wire::kProtocolVersion) {
    return absl::FailedPreconditionError(
        fmt::format("protocol version {} not supported (broker speaks {})",
                    req.protocol_version(), wire::kProtocolVersion));
  }
  auto* h = resp->mutable_handshake();
  h->set_protocol_version(wire::kProtocolVersion);
  h->set_broker_version("tokimq " TOKIMQ_VERSION);
  h->set_manual_clock(manual_clock());
  h->set_now_ms(clock_->NowMs());
  return absl::OkStatus();
}

absl::Status Broker::HandleListTopics(proto::Response* resp) {
  proto::ListTopicsResponse* out = resp->mutable_list_topics();
  for (const TopicConfig& t : metadata_->ListTopics()) ToProtoTopic(t, out->add_topics());
  return absl::OkStatus();
}

absl::Status Broker::HandleChangeInvisibleDuration(const proto::ChangeInvisibleDurationRequest& req,
                                                   proto::Response* resp) {
  if (req.invisible_ms() <= 0) {
    return absl::InvalidArgumentError("invisible duration must be > 0 ms");
  }
  absl::StatusOr<std::string> handle =
      consumers_->ChangeInvisibleDuration(req.group(), req.receipt_handle(), req.invisible_ms());
  if (!handle.ok()) return handle.status();
  TOKIMQ_RETURN_IF_ERROR(replication_->AwaitStateReplicated());  // sync: a follower holds the renewal
  resp->mutable_change_invisible_duration()->set_receipt_handle(*handle);
  return absl::OkStatus();
}

absl::Status Broker::HandleNack(const proto::NackRequest& req) {
  std::optional<int64_t> delay;
  if (req.has_delay_ms()) {
    if (req.delay_ms() < 0) return absl::InvalidArgumentError("nack delay must be >= 0 ms");
    delay = req.delay_ms();
  }
  TOKIMQ_RETURN_IF_ERROR(consumers_->Nack(req.group(), req.receipt_handle(), delay));
  return replication_->AwaitStateReplicated();
}

absl::Status Broker::HandleCreateTopic(const proto::CreateTopicRequest& req,
                                       proto::Response* resp) {
  if (!req.brokers().empty()) {
    return absl::FailedPreconditionError("--brokers needs a broker in a cluster (--cluster)");
  }
  TOKIMQ_ASSIGN_OR_RETURN(TopicConfig c, FromProtoTopic(req.topic()));
  if (c.retention_ms == 0) c.retention_ms = options_.default_retention_ms;
  c.created_ms = clock_->NowMs();
  TOKIMQ_RETURN_IF_ERROR(metadata_->CreateTopic(c));
  TOKIMQ_LOG_INFO("topic {} created: {} queues={} max_delay={}", c.name, TopicTypeName(c.type),
                  c.queues, wire::FormatDuration(c.max_delay_ms));
  ToProtoTopic(c, resp->mutable_topic()->mutable_topic());
  return absl::OkStatus();
}

absl::Status Broker::HandleUpdateTopic(const proto::UpdateTopicRequest& req,
                                       proto::Response* resp) {
  if (!req.add_brokers().empty()) {
    return absl::FailedPreconditionError("--add-broker needs a broker in a cluster (--cluster)");
  }
  std::optional<TopicConfig> old = metadata_->GetTopic(req.topic().name());
  if (!old) return absl::NotFoundError(fmt::format("topic '{}' does not exist", req.topic().name()));
  // Unset fields keep their value.
  TopicConfig c = *old;
  if (req.topic().type() != proto::TOPIC_TYPE_UNSPECIFIED) {
    c.type = static_cast<TopicType>(static_cast<int>(req.topic().type()));
  }
  if (req.topic().queues() != 0) c.queues = req.topic().queues();
  if (req.topic().max_delay_ms() != 0) c.max_delay_ms = req.topic().max_delay_ms();
  if (req.topic().retention_ms() != 0) c.retention_ms = req.topic().retention_ms();
  TOKIMQ_RETURN_IF_ERROR(metadata_->UpdateTopic(c));
  return HandleDescribeTopic(c.name, resp);
}

absl::Status Broker::HandleDescribeTopic(const std::string& name, proto::Response* resp) {
  std::optional<TopicConfig> t = metadata_->GetTopic(name);
  if (!t) return absl::NotFoundError(fmt::format("topic '{}' does not exist", name));
  auto* out = resp->mutable_topic();
  ToProtoTopic(*t, out->mutable_topic());
  for (int32_t q = 0; q < t->queues; ++q) {
    auto* qi = out->add_queues();
    qi->set_queue_id(q);
    qi->set_min_offset(store_->MinQueueOffset(name, q).value());
    qi->set_max_offset(store_->MaxQueueOffset(name, q).value());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<absl::Status>> Broker::AckHandles(
    const std::string& group, const google::protobuf::RepeatedPtrField<std::string>& handles) {
  // One AckBatch per request: one group-state write for all its handles.
  std::vector<std::string_view> views(handles.begin(), handles.end());
  std::vector<absl::Status> results = consumers_->AckBatch(group, views);
  // replication = "sync": answered once a follower holds the acks (a failed wait fails the
  // request; the acks stand on this broker, so a retry finds the handles stale).
  if (std::any_of(results.begin(), results.end(), [](const absl::Status& r) { return r.ok(); })) {
    TOKIMQ_RETURN_IF_ERROR(replication_->AwaitStateReplicated());
  }
  return results;
}

absl::Status Broker::HandleAck(const proto::AckRequest& req, proto::AckResponse* resp) {
  if (req.receipt_handles().empty()) return absl::InvalidArgumentError("ack without handles");
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<absl::Status> results,
                          AckHandles(req.group(), req.receipt_handles()));
  resp->mutable_results()->Reserve(static_cast<int>(results.size()));
  for (const absl::Status& s : results) wire::ToProto(s, resp->add_results());
  return absl::OkStatus();
}

absl::Status Broker::HandleStats(const proto::StatsRequest& req, proto::StatsResponse* resp) {
  if (req.topic_limit() < 0 || req.group_limit() < 0) {
    return absl::InvalidArgumentError("topic_limit and group_limit must be >= 0");
  }
  resp->set_now_ms(clock_->NowMs());
  FillTransactionStats(resp->mutable_transactions());
  FillTopicStats(req, resp);
  FillTimerStats(resp->mutable_timer());
  FillGroupStats(req, resp);
  FillStorageStats(resp);
  FillCounterStats(req, resp);
  replication_->GroupStatus(resp->mutable_replication());
  return absl::OkStatus();
}

void Broker::FillTopicStats(const proto::StatsRequest& req, proto::StatsResponse* resp) const {
  size_t total = 0;
  bool more = false;
  const std::vector<TopicConfig> topics = metadata_->ListTopicsPage(
      req.topics_after(), static_cast<size_t>(req.topic_limit()), &total, &more);
  resp->set_topic_count(static_cast<int32_t>(total));
  if (more && !topics.empty()) resp->set_next_topics_after(topics.back().name);
  for (const TopicConfig& t : topics) {
    proto::TopicStats* ts = resp->add_topics();
    ts->set_name(t.name);
    ts->set_type(static_cast<proto::TopicType>(static_cast<int>(t.type)));
    int64_t depth = 0;
    for (int32_t q = 0; q < t.queues; ++q) {
      const int64_t min = store_->MinQueueOffset(t.name, q).value();
      const int64_t max = store_->MaxQueueOffset(t.name, q).value();
      depth += max - min;
      if (req.omit_queues()) continue;
      auto* qi = ts->add_queues();
      qi->set_queue_id(q);
      qi->set_min_offset(min);
      qi->set_max_offset(max);
    }
    ts->set_depth(depth);
  }
}

void Broker::FillTimerStats(proto::TimerStats* timer) const {
  timers_->RefreshGauges();  // pending by delay and the lags as of now, not the last checkpoint
  TimerMetrics& tm = timers_->metrics();
  timer->set_pending(tm.pending.Value());
  for (const Gauge& g : tm.pending_by_bucket) timer->add_pending_by_bucket(g.Value());
  timer->set_enqueue_lag(tm.enqueue_lag.Value());
  timer->set_dequeue_lag_ms(tm.dequeue_lag_ms.Value());
  timer->set_delivered(tm.delivered.Value());
  timer->set_rolled(tm.rolled.Value());
  timer->set_recalled(tm.recalled.Value());
  timer->set_dropped(tm.dropped.Value());
  timer->set_poison_parked(tm.poison_parked.Value());
  timer->set_retention_pinned_bytes(tm.pinned_bytes.Value());
  timer->set_retention_moved(tm.moved.Value());
  timer->set_retention_moved_bytes(tm.moved_bytes.Value());
  timer->set_oldest_pending_segment_age_ms(tm.oldest_pending_segment_age_ms.Value());
  timer->set_retention_move_aborts(tm.move_aborts.Value());
  // Percentiles, max and buckets from one copy, so a client's figures agree with ours.
  HistogramSnapshot lateness = tm.lateness_ms.Snapshot();
  timer->set_lateness_p50_ms(lateness.Percentile(0.5));
  timer->set_lateness_p99_ms(lateness.Percentile(0.99));
  timer->set_lateness_max_ms(lateness.max);
  for (const HistogramBucket& b : lateness.buckets) {
    proto::LatenessBucket* pb = timer->add_lateness_buckets();
    pb->set_upper_ms(b.upper_bound);
    pb->set_count(b.count);
  }
  timer->set_lateness_count(lateness.count);
  timer->set_lateness_sum_ms(tm.lateness_ms.Sum());
}

void Broker::FillGroupStats(const proto::StatsRequest& req, proto::StatsResponse* resp) {
  std::lock_guard<std::mutex> lock(subs_mu_);
  resp->set_group_count(static_cast<int32_t>(subscriptions_.size()));
  auto it = req.groups_after().empty() ? subscriptions_.begin()
                                       : subscriptions_.upper_bound(req.groups_after());
  for (int n = 0; it != subscriptions_.end(); ++it, ++n) {
    if (req.group_limit() > 0 && n == req.group_limit()) {
      resp->set_next_groups_after(std::prev(it)->first);
      break;
    }
    const auto& [group, topics] = *it;
    proto::GroupStats* gs = resp->add_groups();
    gs->set_group(group);
    gs->set_in_flight(consumers_->InFlight(group));
    gs->set_dlq_depth(consumers_->DlqDepth(group));
    gs->set_parked(consumers_->Parked(group));
    gs->set_delivery_order(
        static_cast<proto::DeliveryOrder>(static_cast<int>(group_configs_->OrderOf(group))));
    if (req.omit_group_topics()) continue;
    for (const std::string& t : topics) gs->add_topics(t);
  }
}

void Broker::FillStorageStats(proto::StatsResponse* resp) const {
  resp->set_poison_depth(store_->MaxQueueOffset(kPoisonTopic, 0) -
                         store_->MinQueueOffset(kPoisonTopic, 0));
  resp->set_commitlog_max_offset(store_->commit_log()->MaxOffset().value());
  resp->set_commitlog_flushed_offset(store_->commit_log()->FlushedOffset().value());
  resp->set_commitlog_min_offset(store_->commit_log()->MinOffset().value());
  const CommitLogSyncStats syncs = store_->commit_log()->sync_stats();
  resp->set_commitlog_syncs(syncs.segment_syncs);
  resp->set_commitlog_sync_rounds(syncs.rounds);
  resp->set_commitlog_durable_waits(syncs.durable_waits);
  resp->set_retention_ms(EffectiveRetentionMs());
  const DiskWatermark::Snapshot disk = watermark_->snapshot();
  resp->set_disk_free_bytes(disk.free_bytes);
  resp->set_disk_total_bytes(disk.total_bytes);
  resp->set_disk_watermark_free_bytes(disk.threshold_bytes);
  resp->set_disk_state(static_cast<proto::DiskState>(static_cast<int>(disk.state)));
  resp->set_sends_refused(disk.sends_refused);
  resp->set_disk_no_space_errors(disk.no_space_errors);
  if (retention_) {
    resp->set_retention_runs(retention_->runs());
    resp->set_retention_last_run_ms(retention_->last_run_ms());
    resp->set_retention_deleted_segments(retention_->deleted_segments());
  }
}

}  // namespace tokimq::broker
