// Broker::HandleSend: validates a send request's entries, then stores them (delayed ones
// through the TimerStore, immediate ones straight into the MessageStore).
#include <algorithm>

#include "broker/broker.h"
#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "common/clock.h"
#include "common/message_limits.h"
#include "common/names.h"
#include "common/status.h"
#include "disk_watermark.h"
#include "fmt/format.h"
#include "proto/duration.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker {

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

}  // namespace tokimq::broker
