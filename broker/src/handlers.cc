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
      h->set_broker_version("tokimq 0.1.0");
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

absl::Status Broker::HandleSend(const proto::SendRequest& req, proto::SendResponse* resp) {
  if (req.entries().empty()) return absl::InvalidArgumentError("send request without messages");
  const int64_t now = clock_->NowMs();
  struct Prepared {
    Message msg;
    int64_t deliver_ms;
  };
  std::vector<Prepared> prepared;
  prepared.reserve(static_cast<size_t>(req.entries_size()));
  // Topic look-ups of this request (requested name -> config): a batch usually names one topic.
  // A returned pointer is used only until the next look-up.
  std::vector<std::pair<std::string, TopicConfig>> topics;
  auto resolve = [&](const std::string& name) -> absl::StatusOr<const TopicConfig*> {
    for (const auto& [n, t] : topics) {
      if (n == name) return &t;
    }
    if (name == kPoisonTopic) {
      return absl::InvalidArgumentError(
          fmt::format("topic '{}' is a system topic: it can be read, not sent to", name));
    }
    TOKIMQ_ASSIGN_OR_RETURN(TopicConfig t, ResolveTopic(name));
    topics.emplace_back(name, std::move(t));
    return &topics.back().second;
  };
  // Validate everything first: a bad entry fails the whole request with nothing stored.
  for (int i = 0; i < req.entries_size(); ++i) {
    const proto::SendEntry& e = req.entries(i);
    auto where = [&](const absl::Status& s) {
      std::string prefix = req.entries_size() > 1 ? fmt::format("message {}: ", i) : "";
      return absl::Status(s.code(), prefix + std::string(s.message()));
    };
    absl::StatusOr<const TopicConfig*> resolved = resolve(e.topic());
    if (!resolved.ok()) return where(resolved.status());
    const TopicConfig* topic = *resolved;
    if (e.body().size() > options_.max_message_size) {
      return where(absl::InvalidArgumentError(fmt::format(
          "body of {} bytes exceeds the max message size of {} bytes", e.body().size(),
          options_.max_message_size)));
    }
    int64_t deliver_ms = now;
    if (e.when_case() == proto::SendEntry::kDelayMs) {
      if (e.delay_ms() < 0) return where(absl::InvalidArgumentError("delay must be >= 0"));
      if (e.delay_ms() > kMaxMaxDelayMs) {
        return where(absl::InvalidArgumentError(fmt::format(
            "delay {} exceeds the max delay {} of topic '{}'", wire::FormatDuration(e.delay_ms()),
            wire::FormatDuration(topic->max_delay_ms), topic->name)));
      }
      deliver_ms = now + e.delay_ms();
    } else if (e.when_case() == proto::SendEntry::kDeliverAtMs) {
      deliver_ms = std::max(e.deliver_at_ms(), now);
    }
    if (deliver_ms - now > topic->max_delay_ms) {
      return where(absl::InvalidArgumentError(fmt::format(
          "delay {} exceeds the max delay {} of topic '{}'", wire::FormatDuration(deliver_ms - now),
          wire::FormatDuration(topic->max_delay_ms), topic->name)));
    }
    // FIFO: the message group (explicit, else the key) picks the queue, so one group's
    // messages share one queue and its order (docs/ordering.md).
    const std::string& group = e.message_group().empty() ? e.key() : e.message_group();
    if (e.properties().count(prop::kMessageGroup) > 0) {
      return where(absl::InvalidArgumentError(fmt::format(
          "property {} is reserved: set the message group instead", prop::kMessageGroup)));
    }
    // The timer store acts on these: TIMER_DELETE_OF on a delayed message made it a recall
    // marker (it cancelled the pending message at that offset, and itself was never
    // delivered); TIMER_SRC_OFFSET on any message made crash recovery take the pending message
    // at that offset as delivered. Found by a break-it pass.
    for (const char* reserved : {kTimerDeleteOf, kTimerSourceOffset}) {
      if (e.properties().count(reserved) > 0) {
        return where(absl::InvalidArgumentError(
            fmt::format("property {} is reserved for the timer store", reserved)));
      }
    }
    // Key, tag and properties: one limit each and one on their total (common/message_limits.h;
    // an 8.5 MiB key used to be stored, and its receive answer exceeded the frame limit).
    if (absl::Status hs = CheckMessageHeaders(e.key(), e.tag(), e.properties()); !hs.ok()) {
      return where(hs);
    }
    if (topic->type == TopicType::kFifo) {
      const char* what = e.message_group().empty() ? "message group (the key)" : "message group";
      if (group.empty()) {
        return where(absl::InvalidArgumentError(fmt::format(
            "topic '{}' is FIFO: a message needs a message group (or a key)", topic->name)));
      }
      if (group.size() > kMaxMessageGroupBytes) {
        return where(absl::InvalidArgumentError(fmt::format(
            "{} of {} bytes exceeds {} bytes", what, group.size(), kMaxMessageGroupBytes)));
      }
      for (unsigned char c : group) {
        if (c < 0x20 || c == 0x7f) {
          return where(absl::InvalidArgumentError(
              fmt::format("{} contains a control character", what)));
        }
      }
    } else if (!e.message_group().empty()) {
      return where(absl::InvalidArgumentError(fmt::format(
          "topic '{}' is {}: message groups need a FIFO topic", topic->name,
          TopicTypeName(topic->type))));
    }
    Message m;
    m.topic = topic->name;
    m.queue_id = SelectQueue(*topic, topic->type == TopicType::kFifo ? group : e.key());
    m.born_ms = e.born_ms() > 0 ? e.born_ms() : now;
    for (const auto& [k, v] : e.properties()) m.properties[k] = v;
    if (!e.key().empty()) m.properties[prop::kKeys] = e.key();
    if (!e.tag().empty()) m.properties[prop::kTag] = e.tag();
    if (topic->type == TopicType::kFifo) m.properties[prop::kMessageGroup] = group;
    m.properties[prop::kMessageId] = NextMessageId();
    m.body = e.body();
    prepared.push_back({std::move(m), deliver_ms});
  }

  // Producers are refused above the disk watermark, before anything is written: the space
  // left is the reserve for the broker's own writes (docs/operations.md "Disk full"). Both
  // APIs come through here (the gRPC SendMessage calls Handle).
  uint64_t bytes = 0;
  for (const Prepared& p : prepared) {
    bytes += p.msg.body.size() + p.msg.topic.size() + record::kMinMessageSize;
    for (const auto& [k, v] : p.msg.properties) bytes += k.size() + v.size() + 8;
  }
  TOKIMQ_RETURN_IF_ERROR(watermark_->AdmitProducer(bytes));
  auto note_no_space = [this](const absl::Status& s) {
    if (absl::IsResourceExhausted(s)) watermark_->NoteNoSpace();
    return s;
  };

  // Delayed messages go in one TimerStore::ScheduleBatch, immediate ones in one PutBatch: one
  // CommitLog write and one durability wait each. A storage error fails the request; entries
  // of the other call may be stored (see protocol.md).
  std::vector<ScheduleItem> delayed;
  std::vector<int> delayed_index;
  std::vector<Message> immediate;
  std::vector<int> immediate_index;
  delayed.reserve(prepared.size());
  delayed_index.reserve(prepared.size());
  resp->mutable_results()->Reserve(static_cast<int>(prepared.size()));
  for (size_t i = 0; i < prepared.size(); ++i) {
    proto::SendResult* r = resp->add_results();
    const Message& m = prepared[i].msg;
    r->set_message_id(m.properties.at(prop::kMessageId));
    r->set_topic(m.topic);
    r->set_queue_id(m.queue_id);
    r->set_deliver_at_ms(prepared[i].deliver_ms);
    if (prepared[i].deliver_ms > now) {
      delayed.push_back({std::move(prepared[i].msg), prepared[i].deliver_ms});
      delayed_index.push_back(static_cast<int>(i));
    } else {
      immediate.push_back(std::move(prepared[i].msg));
      immediate_index.push_back(static_cast<int>(i));
    }
  }
  if (!delayed.empty()) {
    absl::StatusOr<std::vector<ScheduleResult>> scheduled =
        timers_->ScheduleBatch(std::move(delayed));
    if (!scheduled.ok()) return note_no_space(scheduled.status());
    std::vector<ScheduleResult>& srs = *scheduled;
    for (size_t j = 0; j < srs.size() && j < delayed_index.size(); ++j) {
      proto::SendResult* r = resp->mutable_results(delayed_index[j]);
      r->set_queue_offset(srs[j].put.queue_offset);
      r->set_recall_handle(std::move(srs[j].recall_handle));
      r->set_delayed(!srs[j].delivered_now);
    }
  }
  if (!immediate.empty()) {
    absl::StatusOr<std::vector<PutResult>> put = store_->PutBatch(std::move(immediate));
    if (!put.ok()) return note_no_space(put.status());
    const std::vector<PutResult>& puts = *put;
    for (size_t j = 0; j < puts.size() && j < immediate_index.size(); ++j) {
      resp->mutable_results(immediate_index[j])->set_queue_offset(puts[j].queue_offset);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReceivedMessage>> Broker::ReceiveFor(
    const proto::ReceiveRequest& req) {
  if (req.group().empty()) return absl::InvalidArgumentError("receive needs a consumer group");
  TOKIMQ_RETURN_IF_ERROR(ResolveTopic(req.topic()).status());
  if (req.max_messages() < 0 || req.max_messages() > 1024) {
    return absl::InvalidArgumentError("max messages must be 1..1024");
  }
  if (req.invisible_ms() < 0 || req.long_poll_ms() < 0) {
    return absl::InvalidArgumentError("durations must be >= 0");
  }
  RememberSubscription(req.group(), req.topic());
  ReceiveRequest r;
  r.group = req.group();
  r.topic = req.topic();
  r.max_messages = req.max_messages() == 0 ? 16 : req.max_messages();
  r.invisible_ms = req.invisible_ms() == 0 ? 30'000 : req.invisible_ms();
  r.long_poll_ms = std::min(req.long_poll_ms(), options_.max_long_poll_ms);
  r.tag_filter = req.tag_filter();
  // Stored records straight into the response: no decoded Message in between.
  r.raw_records = true;
  // A response must fit a frame (16 MiB by default on both sides): several near-maximum
  // messages in one response used to exceed it, and the client refused every such response
  // while the messages stayed leased. Half the default frame leaves room for the fields.
  r.max_bytes = kMaxReceiveResponseBytes;
  // And one message alone must fit: a message stored before the key/tag/property limits could
  // exceed the frame (an 8.5 MiB key is in the answer twice) and would stay leased forever.
  r.max_message_bytes = options_.max_frame_bytes;
  return consumers_->Receive(r);
}

namespace {
// The response fields of one received message, as views into its record and `rm`.
absl::Status FieldsOf(const ReceivedMessage& rm, ReceivedFields* f) {
  record::RecordView m;
  // Read and checksummed by the store a moment ago; a failure here is a bug, not bad data.
  TOKIMQ_RETURN_IF_ERROR(record::DecodeCopiedView(rm.record, &m));
  m.FindProperty(prop::kMessageId, &f->message_id);
  m.FindProperty(prop::kKeys, &f->key);
  m.FindProperty(prop::kTag, &f->tag);
  f->topic = m.topic;
  f->queue_id = m.queue_id;
  f->queue_offset = m.queue_offset;
  f->body = m.body;
  f->born_ms = m.born_ms;
  f->receipt_handle = rm.receipt_handle;
  f->delivery_attempt = rm.delivery_attempt;
  f->deliver_ms = rm.deliver_ms;
  f->invisible_until_ms = rm.invisible_until_ms;
  f->properties_encoded = m.properties;
  return absl::OkStatus();
}
}  // namespace

absl::Status Broker::HandleReceive(const proto::ReceiveRequest& req,
                                   proto::ReceiveResponse* resp) {
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<ReceivedMessage> got, ReceiveFor(req));
  resp->mutable_messages()->Reserve(static_cast<int>(got.size()));
  for (ReceivedMessage& rm : got) {
    ReceivedFields f;
    TOKIMQ_RETURN_IF_ERROR(FieldsOf(rm, &f));
    proto::ReceivedMessage* out = resp->add_messages();
    out->set_message_id(f.message_id.data(), f.message_id.size());
    out->set_topic(f.topic.data(), f.topic.size());
    out->set_queue_id(f.queue_id);
    out->set_queue_offset(f.queue_offset);
    out->set_key(f.key.data(), f.key.size());
    out->set_tag(f.tag.data(), f.tag.size());
    if (req.encoded_properties()) {
      // The stored bytes as they are (callgrind: building and serializing the map was ~10 %
      // of a lease receive + ack).
      out->set_properties_encoded(f.properties_encoded.data(), f.properties_encoded.size());
    } else {
      auto* props = out->mutable_properties();
      Decoder pd(f.properties_encoded);
      std::string_view k, v;
      while (pd.GetLengthPrefixed(&k) && pd.GetLengthPrefixed(&v)) {
        props->insert({std::string(k), std::string(v)});  // one lookup; the first one wins
      }
    }
    out->set_born_ms(f.born_ms);
    out->set_receipt_handle(std::move(rm.receipt_handle));
    out->set_delivery_attempt(f.delivery_attempt);
    out->set_deliver_ms(f.deliver_ms);
    out->set_invisible_until_ms(f.invisible_until_ms);
    out->set_body(f.body.data(), f.body.size());
  }
  return absl::OkStatus();
}

std::optional<Broker::EncodedResponse> Broker::HandleReceiveFrame(const proto::Request& req) {
  if (req.body_case() != proto::Request::kReceive || !req.receive().encoded_properties()) {
    return std::nullopt;
  }
  // On a failure after the receive (never expected), the messages leased here are redelivered
  // when their leases expire.
  EncodedResponse out;
  absl::StatusOr<std::vector<ReceivedMessage>> got = ReceiveFor(req.receive());
  if (!got.ok()) {
    out.status = got.status();
    return out;
  }
  std::vector<ReceivedFields> fields(got->size());
  for (size_t i = 0; i < got->size(); ++i) {
    out.status = FieldsOf((*got)[i], &fields[i]);
    if (!out.status.ok()) return out;
  }
  out.frame = EncodeReceiveFrame(req.id(), fields);
  out.messages = static_cast<int>(fields.size());
  if (out.frame.empty()) out.status = absl::InternalError("receive response encoding failed");
  return out;
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
