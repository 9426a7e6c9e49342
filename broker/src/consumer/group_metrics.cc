// ConsumerServiceImpl: a group's figures for Stats and /metrics (ConsumerService::Metrics),
// computed when asked from the queues' progress and the store's end offsets.
#include <algorithm>
#include <map>

#include "commitlog/message_store.h"
#include "common/parse_int.h"
#include "common/property_keys.h"
#include "consumer/consumer_service_impl.h"

namespace tokimq::consumer {
namespace {

// When a message became visible in its queue: its timer deliver time, else its store time
// (the rule Receive uses for ReceivedMessage::deliver_ms).
int64_t VisibleMs(const Message& m) {
  auto it = m.properties.find(prop::kDeliverMs);
  int64_t ms = 0;
  if (it != m.properties.end() && ParseInt64(it->second, &ms)) return ms;
  return m.store_ms;
}

}  // namespace

GroupMetrics ConsumerServiceImpl::Metrics(const std::string& group) const {
  GroupMetrics out;
  std::vector<Progress*> mine;
  {
    std::lock_guard<std::mutex> l(map_mu_);
    auto g = groups_.find(group);
    if (g != groups_.end()) {
      out.acked = g->second->acked.load();
      out.lease_expired = g->second->lease_expired.load();
    }
    for (auto it = progress_.lower_bound(QueueKey{group, "", "", 0});
         it != progress_.end() && it->first.group == group; ++it) {
      mine.push_back(it->second.get());
    }
  }
  std::map<std::string, GroupTopicMetrics> by_topic;
  for (Progress* p : mine) {
    int64_t received = 0, consume = -1, first_entry = -1;
    {
      std::lock_guard<std::mutex> l(p->mu);
      received = p->received;
      consume = p->consume_offset;
      if (!p->leases.empty()) first_entry = p->leases.begin()->first;
    }
    const QueueKey& k = p->key;
    GroupTopicMetrics& t = by_topic[k.topic];
    t.topic = k.topic;
    t.received += received;
    const int64_t end = store_->MaxQueueOffset(k.read_topic, k.queue_id).value();
    if (consume >= 0 && end > consume) t.lag += end - consume;
    // The queue's oldest message not acked: its first leased or parked entry, else the first
    // one not handed out.
    int64_t oldest = first_entry;
    if (oldest < 0 && consume >= 0 && end > consume) oldest = consume;
    if (oldest < 0) continue;
    absl::StatusOr<std::vector<Message>> msgs = store_->ReadQueue(k.read_topic, k.queue_id,
                                                                  QueueOffset(oldest), 1);
    if (!msgs.ok() || msgs->empty()) continue;  // gone (retention): nothing to date
    const int64_t visible = VisibleMs(msgs->front());
    if (out.oldest_unacked_visible_ms == 0 || visible < out.oldest_unacked_visible_ms) {
      out.oldest_unacked_visible_ms = visible;
    }
  }
  for (auto& [name, t] : by_topic) out.topics.push_back(std::move(t));
  return out;
}

}  // namespace tokimq::consumer
