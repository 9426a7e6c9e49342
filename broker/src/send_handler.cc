// Broker::HandleSend: validates a send request's entries (send_validation.h), then stores them
// (delayed ones through the TimerStore, immediate ones straight into the MessageStore).
#include <algorithm>
#include <future>

#include "broker/broker.h"
#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "common/clock.h"
#include "common/names.h"
#include "common/status.h"
#include "disk_watermark.h"
#include "fmt/format.h"
#include "proto/status.h"
#include "replication/replication_service.h"
#include "send_properties.h"
#include "send_validation.h"
#include "timerstore/timer_store.h"
#include "transaction/transaction_send.h"
#include "transaction/transaction_service.h"

namespace tokimq::broker {
namespace {

// The CommitLog bytes the prepared messages will take, about (header, topic, body and
// properties; the disk watermark's admission figure).
uint64_t RecordBytesOf(const std::vector<PreparedSend>& prepared) {
  uint64_t bytes = 0;
  for (const PreparedSend& p : prepared) {
    bytes += p.msg.body.size() + p.msg.topic.size() + record::kMinMessageSize +
             p.msg.encoded_properties.size();
    for (const auto& [k, v] : p.msg.properties) bytes += k.size() + v.size() + 8;
  }
  return bytes;
}

}  // namespace

absl::Status Broker::PrepareSend(const proto::SendRequest& req, int64_t now,
                                 std::vector<PreparedSend>* prepared) {
  prepared->reserve(static_cast<size_t>(req.entries_size()));
  // Topic look-ups of this request (requested name -> config): a batch usually names one topic.
  // A returned pointer is used only until the next look-up.
  std::vector<std::pair<std::string, TopicConfig>> topics;
  auto resolve = [&](const std::string& name) -> absl::StatusOr<const TopicConfig*> {
    for (const auto& [n, t] : topics) {
      if (n == name) return &t;
    }
    if (name == kPoisonTopic || name == kUnresolvedTopic) {
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
    int64_t deliver_ms = now;
    absl::Status valid = ValidateSendEntry(e, *topic, options_.max_message_size, now, &deliver_ms);
    if (!valid.ok()) return where(valid);
    // FIFO: the message group (explicit, else the key) picks the queue, so one group's
    // messages share one queue and its order (docs/ordering.md).
    const std::string& group = MessageGroupOf(e);
    Message m;
    m.topic = topic->name;
    m.queue_id = SelectQueue(*topic, topic->type == TopicType::kFifo ? group : e.key());
    m.born_ms = e.born_ms() > 0 ? e.born_ms() : now;
    std::string id = NextMessageId();
    const bool fifo = topic->type == TopicType::kFifo;
    if (e.transactional()) {
      // Halves go through the map: the transaction service adds its properties to it.
      for (const auto& [k, v] : e.properties()) m.properties[k] = v;
      if (!e.key().empty()) m.properties[prop::kKeys] = e.key();
      if (!e.tag().empty()) m.properties[prop::kTag] = e.tag();
      if (fifo) m.properties[prop::kMessageGroup] = group;
      m.properties[prop::kMessageId] = id;
    } else {
      // The same pairs, encoded in one pass (send_properties.h); the timer store's rewrite
      // edits the encoded section.
      EncodeSendProperties(e, fifo ? &group : nullptr, id, &m.encoded_properties);
    }
    m.body = e.body();
    prepared->push_back({std::move(m), deliver_ms});
    prepared->back().message_id = std::move(id);
    if (e.transactional()) {
      absl::StatusOr<int64_t> immunity = CheckImmunityMsOf(e, options_.transaction_immunity_ms);
      if (!immunity.ok()) return where(immunity.status());
      prepared->back().transactional = true;
      prepared->back().immunity_ms = *immunity;
    }
  }
  return absl::OkStatus();
}

void Broker::HandleNoWait(const proto::Request& req, proto::Response* resp,
                          absl::AnyInvocable<void() &&> done) {
  if (req.body_case() != proto::Request::kSend || !SendsAnsweredByGroupCommit()) {
    Handle(req, resp);
    std::move(done)();
    return;
  }
  resp->set_id(req.id());
  if (absl::Status w = replication_->CheckWritable(); !w.ok()) {
    wire::ToProto(w, resp->mutable_status());
    std::move(done)();
    return;
  }
  PhysicalOffset end;
  absl::Status s = HandleSend(req.send(), resp->mutable_send(), /*wait_durable=*/false, &end);
  if (!s.ok() || end <= PhysicalOffset(0)) {
    if (!s.ok()) {
      resp->clear_body();
      wire::ToProto(s, resp->mutable_status());
    }
    std::move(done)();
    return;
  }
  // Answered from the group commit's sync thread once the fsync covering `end` returned: this
  // thread is free for the next request meanwhile, so every send in flight, from any
  // connection, can share that fsync.
  // replication = "sync": then answered once a follower acknowledged `end` (AckTracker, on the
  // pulling follower's request thread or the expiry thread); in that order, so an OK answer
  // means durable here per the flush policy and held by a follower.
  auto answer = [resp, done = std::move(done)](absl::Status st) mutable {
    if (!st.ok()) {
      resp->clear_body();
      wire::ToProto(st, resp->mutable_status());
    }
    std::move(done)();
  };
  if (options_.flush_mode != FlushMode::kSync) {
    replication_->WhenReplicated(end, std::move(answer));
    return;
  }
  store_->commit_log()->WhenDurable(
      end, [this, end, answer = std::move(answer)](absl::Status st) mutable {
        if (!st.ok()) return answer(st);
        replication_->WhenReplicated(end, std::move(answer));
      });
}

absl::Status Broker::HandleSendReplicated(const proto::SendRequest& req,
                                          proto::SendResponse* resp) {
  PhysicalOffset end;
  TOKIMQ_RETURN_IF_ERROR(HandleSend(req, resp, /*wait_durable=*/true, &end));
  if (!replication_->sync() || end <= PhysicalOffset(0)) return absl::OkStatus();
  std::promise<absl::Status> replicated;
  std::future<absl::Status> done = replicated.get_future();
  replication_->WhenReplicated(end, [&replicated](absl::Status s) { replicated.set_value(s); });
  absl::Status s = done.get();
  if (!s.ok()) resp->Clear();
  return s;
}

absl::Status Broker::HandleSend(const proto::SendRequest& req, proto::SendResponse* resp,
                                bool wait_durable, PhysicalOffset* durable_end) {
  if (durable_end != nullptr) *durable_end = PhysicalOffset(0);
  if (req.entries().empty()) return absl::InvalidArgumentError("send request without messages");
  const int64_t now = clock_->NowMs();
  using Prepared = PreparedSend;
  std::vector<Prepared> prepared;
  TOKIMQ_RETURN_IF_ERROR(PrepareSend(req, now, &prepared));

  // Producers are refused above the disk watermark, before anything is written: the space
  // left is the reserve for the broker's own writes (docs/operations.md "Disk full"). Both
  // APIs come through here (the gRPC SendMessage calls Handle).
  TOKIMQ_RETURN_IF_ERROR(watermark_->AdmitProducer(RecordBytesOf(prepared)));
  auto note_no_space = [this](const absl::Status& s) {
    if (absl::IsResourceExhausted(s)) watermark_->NoteNoSpace();
    return s;
  };

  // Delayed messages go in one TimerStore::ScheduleBatch, immediate ones in one PutBatch: one
  // CommitLog write and one durability wait each (without wait_durable: one wait, the caller's,
  // for both). A storage error fails the request; entries of the other call may be stored
  // (see protocol.md).
  PhysicalOffset end;
  std::vector<ScheduleItem> delayed;
  std::vector<int> delayed_index;
  std::vector<Message> immediate;
  std::vector<int> immediate_index;
  std::vector<int> half_index;  // transactional entries: stored as halves (StoreHalves)
  delayed.reserve(prepared.size());
  delayed_index.reserve(prepared.size());
  resp->mutable_results()->Reserve(static_cast<int>(prepared.size()));
  for (size_t i = 0; i < prepared.size(); ++i) {
    proto::SendResult* r = resp->add_results();
    const Message& m = prepared[i].msg;
    r->set_message_id(std::move(prepared[i].message_id));
    r->set_topic(m.topic);
    r->set_queue_id(m.queue_id);
    r->set_deliver_at_ms(prepared[i].deliver_ms);
    if (prepared[i].transactional) {
      half_index.push_back(static_cast<int>(i));
    } else if (prepared[i].deliver_ms > now) {
      delayed.push_back({std::move(prepared[i].msg), prepared[i].deliver_ms});
      delayed_index.push_back(static_cast<int>(i));
    } else {
      immediate.push_back(std::move(prepared[i].msg));
      immediate_index.push_back(static_cast<int>(i));
    }
  }
  if (!half_index.empty()) {
    TOKIMQ_RETURN_IF_ERROR(note_no_space(StoreHalves(&prepared, half_index, now, resp)));
  }
  if (!delayed.empty()) {
    absl::StatusOr<std::vector<ScheduleResult>> scheduled =
        wait_durable ? timers_->ScheduleBatch(std::move(delayed))
                     : timers_->ScheduleBatchNoWait(std::move(delayed));
    if (!scheduled.ok()) return note_no_space(scheduled.status());
    std::vector<ScheduleResult>& srs = *scheduled;
    for (size_t j = 0; j < srs.size() && j < delayed_index.size(); ++j) {
      end = std::max(end, srs[j].put.physical_offset + int64_t{srs[j].put.size});
      proto::SendResult* r = resp->mutable_results(delayed_index[j]);
      r->set_queue_offset(srs[j].put.queue_offset.value());
      r->set_recall_handle(std::move(srs[j].recall_handle));
      r->set_delayed(!srs[j].delivered_now);
    }
  }
  if (!immediate.empty()) {
    absl::StatusOr<std::vector<PutResult>> put = wait_durable
                                                     ? store_->PutBatch(std::move(immediate))
                                                     : store_->PutBatchNoWait(std::move(immediate));
    if (!put.ok()) return note_no_space(put.status());
    const std::vector<PutResult>& puts = *put;
    end = std::max(end, DurableEnd(puts));
    for (size_t j = 0; j < puts.size() && j < immediate_index.size(); ++j) {
      resp->mutable_results(immediate_index[j])->set_queue_offset(puts[j].queue_offset.value());
    }
  }
  if (durable_end != nullptr) *durable_end = end;
  CountSent(*resp);
  return absl::OkStatus();
}

}  // namespace tokimq::broker
