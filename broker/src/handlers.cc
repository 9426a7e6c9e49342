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

}  // namespace

void Broker::Handle(const proto::Request& req, proto::Response* resp) {
  resp->set_id(req.id());
  absl::Status s;
  switch (req.body_case()) {
    case proto::Request::kHandshake: {
      if (req.handshake().protocol_version() != wire::kProtocolVersion) {
        s = absl::FailedPreconditionError(
            fmt::format("protocol version {} not supported (broker speaks {})",
                        req.handshake().protocol_version(), wire::kProtocolVersion));
        break;
      }
      auto* h = resp->mutable_handshake();
      h->set_protocol_version(wire::kProtocolVersion);
      h->set_broker_version("tokimq " TOKIMQ_VERSION);
      h->set_manual_clock(manual_clock());
      h->set_now_ms(clock_->NowMs());
      break;
    }
    case proto::Request::kCreateTopic:
      s = HandleCreateTopic(req.create_topic(), resp);
      break;
    case proto::Request::kUpdateTopic:
      s = HandleUpdateTopic(req.update_topic(), resp);
      break;
    case proto::Request::kDeleteTopic:
      s = metadata_->DeleteTopic(req.delete_topic().name());
      if (s.ok()) resp->mutable_empty();
      break;
    case proto::Request::kListTopics:
      for (const TopicConfig& t : metadata_->ListTopics()) {
        ToProtoTopic(t, resp->mutable_list_topics()->add_topics());
      }
      resp->mutable_list_topics();
      break;
    case proto::Request::kDescribeTopic:
      s = HandleDescribeTopic(req.describe_topic().name(), resp);
      break;
    case proto::Request::kSend:
      s = HandleSend(req.send(), resp->mutable_send());
      break;
    case proto::Request::kRecall:
      s = timers_->Recall(req.recall().recall_handle());
      if (s.ok()) resp->mutable_empty();
      break;
    case proto::Request::kReceive:
      s = HandleReceive(req.receive(), resp->mutable_receive());
      break;
    case proto::Request::kAck:
      s = HandleAck(req.ack(), resp->mutable_ack());
      break;
    case proto::Request::kPull:
      s = HandlePull(req.pull(), resp->mutable_pull());
      break;
    case proto::Request::kGetOffset:
      s = HandleGetOffset(req.get_offset(), resp->mutable_offset());
      break;
    case proto::Request::kUpdateOffset:
      s = HandleUpdateOffset(req.update_offset());
      if (s.ok()) resp->mutable_empty();
      break;
    case proto::Request::kQueryOffset:
      s = HandleQueryOffset(req.query_offset(), resp->mutable_offset());
      break;
    case proto::Request::kChangeInvisibleDuration: {
      const auto& r = req.change_invisible_duration();
      if (r.invisible_ms() <= 0) {
        s = absl::InvalidArgumentError("invisible duration must be > 0 ms");
        break;
      }
      absl::StatusOr<std::string> handle =
          consumers_->ChangeInvisibleDuration(r.group(), r.receipt_handle(), r.invisible_ms());
      s = handle.status();
      if (s.ok()) resp->mutable_change_invisible_duration()->set_receipt_handle(*handle);
      break;
    }
    case proto::Request::kNack: {
      const auto& r = req.nack();
      std::optional<int64_t> delay;
      if (r.has_delay_ms()) {
        if (r.delay_ms() < 0) {
          s = absl::InvalidArgumentError("nack delay must be >= 0 ms");
          break;
        }
        delay = r.delay_ms();
      }
      s = consumers_->Nack(r.group(), r.receipt_handle(), delay);
      if (s.ok()) resp->mutable_empty();
      break;
    }
    case proto::Request::kStats:
      s = HandleStats(req.stats(), resp->mutable_stats());
      break;
    case proto::Request::kAdvanceClock:
      s = HandleAdvanceClock(req.advance_clock(), resp);
      break;
    case proto::Request::kTimerCheckpoint:
      s = timers_->Checkpoint();
      if (s.ok()) resp->mutable_empty();
      break;
    case proto::Request::kEndTransaction:
      s = HandleEndTransaction(req.end_transaction());
      if (s.ok()) resp->mutable_empty();
      break;
    case proto::Request::kPollTransactionChecks:
      s = HandlePollTransactionChecks(req.poll_transaction_checks(),
                                      resp->mutable_transaction_checks());
      break;
    case proto::Request::kAuthenticate:
      s = absl::FailedPreconditionError("authenticate is answered by the network server");
      break;
    case proto::Request::kCreateUser:
    case proto::Request::kDeleteUser:
    case proto::Request::kListUsers:
    case proto::Request::kGrantAcl:
    case proto::Request::kRevokeAcl:
    case proto::Request::kListAcl:
      s = HandleAuthAdmin(req, resp);
      break;
    case proto::Request::BODY_NOT_SET:
      s = absl::UnimplementedError("unknown or empty request");
      break;
  }
  if (!s.ok()) {
    resp->clear_body();
    wire::ToProto(s, resp->mutable_status());
  }
}

absl::Status Broker::HandleCreateTopic(const proto::CreateTopicRequest& req,
                                       proto::Response* resp) {
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
    qi->set_min_offset(store_->MinQueueOffset(name, q));
    qi->set_max_offset(store_->MaxQueueOffset(name, q));
  }
  return absl::OkStatus();
}

absl::Status Broker::HandleAck(const proto::AckRequest& req, proto::AckResponse* resp) {
  if (req.receipt_handles().empty()) return absl::InvalidArgumentError("ack without handles");
  // One AckBatch per request: one group-state write for all its handles.
  std::vector<std::string_view> handles(req.receipt_handles().begin(),
                                        req.receipt_handles().end());
  std::vector<absl::Status> results = consumers_->AckBatch(req.group(), handles);
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
      const int64_t min = store_->MinQueueOffset(t.name, q);
      const int64_t max = store_->MaxQueueOffset(t.name, q);
      depth += max - min;
      if (req.omit_queues()) continue;
      auto* qi = ts->add_queues();
      qi->set_queue_id(q);
      qi->set_min_offset(min);
      qi->set_max_offset(max);
    }
    ts->set_depth(depth);
  }
  timers_->RefreshGauges();  // pending by delay and the lags as of now, not the last checkpoint
  TimerMetrics& tm = timers_->metrics();
  proto::TimerStats* timer = resp->mutable_timer();
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
  {
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
      if (req.omit_group_topics()) continue;
      for (const std::string& t : topics) gs->add_topics(t);
    }
  }
  resp->set_poison_depth(store_->MaxQueueOffset(kPoisonTopic, 0) -
                        store_->MinQueueOffset(kPoisonTopic, 0));
  resp->set_commitlog_max_offset(store_->commit_log()->MaxOffset());
  resp->set_commitlog_flushed_offset(store_->commit_log()->FlushedOffset());
  resp->set_commitlog_min_offset(store_->commit_log()->MinOffset());
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
  return absl::OkStatus();
}

}  // namespace tokimq::broker
