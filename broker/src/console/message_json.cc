#include "console/message_json.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "broker/broker.h"
#include "commitlog/message_store.h"
#include "common/names.h"
#include "common/parse_int.h"
#include "fmt/format.h"
#include "proto/status.h"
#include "timerstore/recall_handle.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker::console {

using nlohmann::json;

namespace {

std::string Prop(const Message& m, const char* key) {
  auto it = m.properties.find(key);
  return it == m.properties.end() ? std::string() : it->second;
}

absl::StatusOr<proto::Response> Call(Broker& broker, const proto::Request& req) {
  proto::Response resp;
  broker.Handle(req, &resp);
  if (resp.has_status() && resp.status().code() != 0) return wire::FromProto(resp.status());
  return resp;
}

// The broker's own properties, not copied by a resend (the send sets its own).
bool IsBrokerProperty(const std::string& k) {
  static const char* kExact[] = {prop::kMessageId,       prop::kKeys,
                                 prop::kTag,             prop::kMessageGroup,
                                 prop::kDeliveryAttempt, prop::kOriginalTopic,
                                 prop::kFirstStoreMs};
  for (const char* e : kExact) {
    if (k == e) return true;
  }
  for (std::string_view p : {"TIMER_", "REAL_", "TX_", "POISON_"}) {
    if (k.compare(0, p.size(), p) == 0) return true;
  }
  return false;
}

bool KeysContain(const std::string& keys, const std::string& key) {
  size_t pos = 0;
  while (pos <= keys.size()) {
    size_t end = keys.find(' ', pos);
    if (end == std::string::npos) end = keys.size();
    if (keys.compare(pos, end - pos, key) == 0) return true;
    pos = end + 1;
  }
  return false;
}

// A pending timer-topic record shown as the scheduled message it is: real topic, deliver time, recall
// handle (naming its first timer-topic record when retention moved it).
json ScheduledJson(const Message& m) {
  Message shown = m;
  shown.topic = Prop(m, prop::kRealTopic);
  json j = MessageJson(shown);
  int64_t deliver = 0, origin = m.physical_offset.value();
  ParseInt64(Prop(m, prop::kDeliverMs), &deliver);
  const std::string o = Prop(m, prop::kTimerOriginOffset);
  if (!o.empty()) ParseInt64(o, &origin);
  j["scheduled"] = true;
  j["deliver_ms"] = deliver;
  j["recall_handle"] =
      RecallHandle{PhysicalOffset(origin), deliver, RecallHandle::IdCrcOf(m)}.Encode();
  return j;
}

}  // namespace

json MessageJson(const Message& m) {
  std::string preview = m.body.substr(0, kBodyPreviewBytes);
  for (char& c : preview) {
    if (c < 0x20 || c > 0x7e) c = '.';
  }
  return json{{"id", Prop(m, prop::kMessageId)},
              {"topic", m.topic},
              {"queue_id", m.queue_id},
              {"queue_offset", m.queue_offset.value()},
              {"key", Prop(m, prop::kKeys)},
              {"tag", Prop(m, prop::kTag)},
              {"born_ms", m.born_ms},
              {"store_ms", m.store_ms},
              {"properties", m.properties},
              {"body_bytes", m.body.size()},
              {"body_preview", preview}};
}

absl::StatusOr<json> DlqJson(const Broker& broker, const std::string& group, int64_t from,
                             int limit) {
  if (absl::Status s = ValidateGroupName(group); !s.ok()) return s;
  if (limit < 1 || limit > kMaxDlqPage) {
    return absl::InvalidArgumentError(fmt::format("limit must be 1..{}", kMaxDlqPage));
  }
  const MessageStore* store = broker.message_store();
  const std::string topic = kDlqTopicPrefix + group;
  const int64_t min = store->MinQueueOffset(topic, 0).value();
  const int64_t max = store->MaxQueueOffset(topic, 0).value();
  if (from < 0) from = std::max(min, max - limit);
  json messages = json::array();
  if (from < max) {
    absl::StatusOr<std::vector<Message>> msgs = store->ReadQueue(topic, 0, QueueOffset(std::max(from, min)), limit);
    if (!msgs.ok()) return msgs.status();
    for (const Message& m : *msgs) messages.push_back(MessageJson(m));
  }
  return json{{"group", group},
              {"topic", topic},
              {"min_offset", min},
              {"max_offset", max},
              {"messages", std::move(messages)}};
}

absl::StatusOr<json> ResendFromDlq(Broker& broker, const std::string& group, int64_t offset) {
  if (absl::Status s = ValidateGroupName(group); !s.ok()) return s;
  const std::string topic = kDlqTopicPrefix + group;
  absl::StatusOr<std::vector<Message>> msgs =
      broker.message_store()->ReadQueue(topic, 0, QueueOffset(offset), 1);
  if (!msgs.ok()) return msgs.status();
  if (msgs->empty() || (*msgs)[0].queue_offset != QueueOffset(offset)) {
    return absl::NotFoundError(fmt::format("no message at offset {} of {}", offset, topic));
  }
  const Message& m = (*msgs)[0];
  const std::string origin = Prop(m, prop::kOriginalTopic);
  if (origin.empty()) {
    return absl::FailedPreconditionError("the DLQ message does not name its topic (ORIGIN_TOPIC)");
  }
  proto::Request req;
  proto::SendEntry* e = req.mutable_send()->add_entries();
  e->set_topic(origin);
  e->set_body(m.body);
  e->set_key(Prop(m, prop::kKeys));
  e->set_tag(Prop(m, prop::kTag));
  e->set_message_group(Prop(m, prop::kMessageGroup));
  e->set_born_ms(m.born_ms);
  for (const auto& [k, v] : m.properties) {
    if (!IsBrokerProperty(k)) (*e->mutable_properties())[k] = v;
  }
  absl::StatusOr<proto::Response> resp = Call(broker, req);
  if (!resp.ok()) return resp.status();
  const proto::SendResult& r = resp->send().results(0);
  return json{{"message_id", r.message_id()}, {"topic", r.topic()}};
}

absl::StatusOr<json> LookupJson(Broker& broker, const std::string& id, const std::string& key) {
  if (id.empty() == key.empty()) return absl::InvalidArgumentError("give either id or key");
  proto::Request req;
  req.mutable_stats();  // every topic with its queues, every group
  absl::StatusOr<proto::Response> st = Call(broker, req);
  if (!st.ok()) return st.status();
  // (topic, queue count): user topics, the groups' DLQ topics, the timer topic.
  std::vector<std::pair<std::string, int>> queues;
  for (const proto::TopicStats& t : st->stats().topics()) queues.emplace_back(t.name(), t.queues_size());
  for (const proto::GroupStats& g : st->stats().groups()) queues.emplace_back(kDlqTopicPrefix + g.group(), 1);
  queues.emplace_back(kTimerTopic, 1);
  const MessageStore* store = broker.message_store();
  json found = json::array();
  int64_t scanned = 0;
  for (const auto& [topic, n] : queues) {
    for (int32_t q = 0; q < n && found.size() < kMaxLookupResults; ++q) {
      const QueueOffset max = store->MaxQueueOffset(topic, q);
      const QueueOffset from = std::max(store->MinQueueOffset(topic, q), max - kLookupScanPerQueue);
      absl::StatusOr<std::vector<Message>> msgs =
          store->ReadQueue(topic, q, from, static_cast<int>(max - from));
      if (!msgs.ok()) continue;  // a queue cut by retention meanwhile: skip it
      scanned += static_cast<int64_t>(msgs->size());
      for (const Message& m : *msgs) {
        const bool hit = id.empty() ? KeysContain(Prop(m, prop::kKeys), key)
                                    : Prop(m, prop::kMessageId) == id;
        if (!hit || found.size() >= kMaxLookupResults) continue;
        if (topic != kTimerTopic) {
          found.push_back(MessageJson(m));
          continue;
        }
        // The timer topic: recall markers are no messages; a record whose deliver time has
        // passed was released (its copy is in its topic, found there).
        int64_t deliver = 0;
        if (m.properties.contains(prop::kTimerDeleteOf) ||
            !ParseInt64(Prop(m, prop::kDeliverMs), &deliver) || deliver <= st->stats().now_ms()) {
          continue;
        }
        found.push_back(ScheduledJson(m));
      }
    }
  }
  return json{{"messages", std::move(found)}, {"scanned", scanned}};
}

absl::StatusOr<json> RecallJson(Broker& broker, const std::string& handle) {
  proto::Request req;
  req.mutable_recall()->set_recall_handle(handle);
  absl::StatusOr<proto::Response> resp = Call(broker, req);
  if (!resp.ok()) return resp.status();
  return json{{"recalled", true}};
}

}  // namespace tokimq::broker::console
