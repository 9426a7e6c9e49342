// Broker: the Stats figures that /metrics needs beyond the store's (issue 18, docs/metrics.md):
// messages sent per topic, each group's acks, lease expiries, backlog per topic and oldest
// un-acked age, the DLQ's end offset, the broker version and start time. All read when asked.
#include <algorithm>

#include "broker/broker.h"
#include "commitlog/message_store.h"
#include "common/clock.h"
#include "common/names.h"
#include "topic_send_counters.h"

namespace tokimq::broker {

void Broker::CountSent(const proto::SendResponse& resp) {
  // Runs of one topic (a batch is usually one topic): one counter update per run.
  const auto& results = resp.results();
  for (int i = 0; i < results.size();) {
    int j = i + 1;
    while (j < results.size() && results[j].topic() == results[i].topic()) ++j;
    sent_->Add(results[i].topic(), j - i);
    i = j;
  }
}

void Broker::FillCounterStats(const proto::StatsRequest& req, proto::StatsResponse* resp) const {
  resp->set_broker_version(TOKIMQ_VERSION);
  resp->set_started_ms(started_ms_);
  for (proto::TopicStats& t : *resp->mutable_topics()) t.set_messages_sent(sent_->Get(t.name()));
  const int64_t now = resp->now_ms();
  for (proto::GroupStats& g : *resp->mutable_groups()) {
    const GroupMetrics m = consumers_->Metrics(g.group());
    g.set_acked(m.acked);
    g.set_lease_expired(m.lease_expired);
    g.set_oldest_unacked_age_ms(
        m.oldest_unacked_visible_ms > 0 ? std::max<int64_t>(0, now - m.oldest_unacked_visible_ms)
                                        : 0);
    g.set_dlq_total(store_->MaxQueueOffset(kDlqTopicPrefix + g.group(), 0).value());
    if (req.omit_group_topics()) continue;
    for (const GroupTopicMetrics& t : m.topics) {
      proto::GroupTopicStats* ts = g.add_topic_stats();
      ts->set_topic(t.topic);
      ts->set_received(t.received);
      ts->set_lag(t.lag);
    }
  }
}

}  // namespace tokimq::broker
