#include "tokimq/cluster_commands.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "client/admin.h"
#include "client/cluster_consumer.h"
#include "client/cluster_producer.h"
#include "common/duration.h"

namespace tokimq::cli {
namespace {

using client::ClientOptions;

std::string Placement(const proto::TopicConfig& t,
                      const std::map<std::string, std::string>& live) {
  std::string out;
  for (const proto::TopicPlacement& p : t.placement()) {
    if (!out.empty()) out += " ";
    out += p.broker() + ":" + std::to_string(p.queues());
    if (!live.count(p.broker())) out += "(down)";
  }
  return out;
}

// One line per broker group: its leader, term and ack mode, then each replica with its lag as
// the leader measures it (issue 20 item 6).
void PrintGroups(const ClientOptions& o, const proto::ClusterStatusResponse& st) {
  std::map<std::string, std::vector<proto::BrokerRecord>> replicas;
  for (const proto::BrokerRecord& r : st.replicas()) replicas[r.name()].push_back(r);
  for (const proto::BrokerRecord& m : st.members()) replicas[m.name()];  // groups of old brokers
  std::map<std::string, proto::BrokerRecord> leaders;
  for (const proto::BrokerRecord& m : st.members()) leaders[m.name()] = m;
  std::printf("groups (%zu):\n", replicas.size());
  for (const auto& [name, reps] : replicas) {
    auto l = leaders.find(name);
    if (l == leaders.end()) {
      std::printf("  %-16s NO LEADER (election pending)\n", name.c_str());
    }
    std::map<std::string, proto::FollowerLag> lag;
    if (l != leaders.end()) {
      ClientOptions lo = o;
      lo.broker = l->second.address();
      lo.connect_timeout_ms = 2'000;
      lo.request_timeout_ms = 2'000;
      auto gs = client::AdminClient(lo).GroupStatus();
      std::printf("  %-16s term %lld  leader id %d at %s", name.c_str(),
                  static_cast<long long>(l->second.term()), l->second.broker_id(),
                  l->second.address().c_str());
      if (gs.ok()) {
        std::printf("  %s  CommitLog end %lld%s\n", gs->replication().c_str(),
                    static_cast<long long>(gs->max_offset()),
                    gs->role() == "leader" ? "" : "  (it reports: not leading)");
        for (const proto::FollowerLag& f : gs->followers()) lag[f.follower()] = f;
      } else {
        std::printf("  unreachable: %s\n", std::string(gs.status().message()).c_str());
      }
    }
    for (const proto::BrokerRecord& r : reps) {
      if (l != leaders.end() && r.broker_id() == l->second.broker_id()) continue;
      std::printf("    follower id %-3d %-21s", r.broker_id(), r.address().c_str());
      auto f = lag.find(std::to_string(r.broker_id()));
      if (f == lag.end()) {
        // Its own view says why (docs/replication.md "TLS between members").
        ClientOptions fo = o;
        fo.broker = r.address();
        fo.connect_timeout_ms = 2'000;
        fo.request_timeout_ms = 2'000;
        auto fs = client::AdminClient(fo).GroupStatus();
        const std::string why = fs.ok() ? fs->pull_error() : "";
        std::printf(" not pulling from the leader in this term%s%s\n", why.empty() ? "" : ": ",
                    why.c_str());
        continue;
      }
      std::printf(" lag %lld bytes %lld ms (acked %lld, last pull %lld ms ago)\n",
                  static_cast<long long>(f->second.lag_bytes()),
                  static_cast<long long>(f->second.lag_ms()),
                  static_cast<long long>(f->second.acked_offset()),
                  static_cast<long long>(f->second.last_pull_ms()));
    }
  }
}

}  // namespace

absl::StatusOr<bool> InCluster(const ClientOptions& o) {
  // group_status needs no permission (any user may send through a cluster; cluster_status
  // needs cluster admin); in cluster mode ClusterNode fills in the broker name.
  auto st = client::AdminClient(o).GroupStatus();
  if (!st.ok()) return st.status();
  return !st->broker_name().empty();
}

bool IsClusterHandle(const std::string& handle) {
  return handle.find('|') != std::string::npos;
}

absl::Status ClusterStatus(const ClientOptions& o) {
  auto st = client::AdminClient(o).ClusterStatus();
  if (!st.ok()) return st.status();
  std::printf("cluster %s (answered by %s: %s, etcd %s, revision %lld)\n", st->cluster().c_str(),
              st->answered_by().c_str(), st->registered() ? "registered" : "NOT registered",
              st->etcd_reachable() ? "reachable" : "UNREACHABLE",
              static_cast<long long>(st->etcd_revision()));
  std::printf("members (%d):\n", st->members_size());
  std::map<std::string, std::string> live;
  for (const proto::BrokerRecord& m : st->members()) {
    live[m.name()] = m.address();
    ClientOptions mo = o;
    mo.broker = m.address();
    mo.connect_timeout_ms = 2'000;
    mo.request_timeout_ms = 2'000;
    auto ping = client::AdminClient(mo).Ping();
    std::string health = ping.ok() ? "healthy" : "unreachable: " + std::string(ping.status().message());
    std::printf("  %-16s native %-21s grpc %-21s %s  %s\n", m.name().c_str(),
                m.address().c_str(), m.grpc_address().empty() ? "-" : m.grpc_address().c_str(),
                health.c_str(), m.version().c_str());
  }
  PrintGroups(o, *st);
  std::printf("topics (%d):\n", st->topics_size());
  for (const proto::TopicConfig& t : st->topics()) {
    std::printf("  %-24s %-11s max_delay=%s placement %s\n", t.name().c_str(),
                proto::TopicType_Name(t.type()).c_str(), FormatDuration(t.max_delay_ms()).c_str(),
                Placement(t, live).c_str());
  }
  return absl::OkStatus();
}

absl::Status ClusterSend(const ClientOptions& o, const SendArgs& a,
                         const client::OutgoingMessage& base, const std::string* body) {
  if (a.transactional) {
    return absl::UnimplementedError("--transactional is not routed in a cluster yet: use "
                                    "--broker with the broker that hosts the topic");
  }
  absl::StatusOr<int64_t> failover_wait = ParseDuration(a.failover_wait);
  if (!failover_wait.ok() || *failover_wait < 0) {
    return absl::InvalidArgumentError("bad --failover-wait '" + a.failover_wait + "'");
  }
  client::ClusterProducer producer(o, 30'000, *failover_wait);
  if (body != nullptr) {
    client::OutgoingMessage m = base;
    m.body = *body;
    auto r = producer.Send(m);
    if (!r.ok()) return r.status();
    PrintSendReceipt(*r);
    return absl::OkStatus();
  }
  std::vector<client::OutgoingMessage> batch;
  int64_t sent = 0;
  auto flush = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    auto r = producer.SendBatch(batch);
    batch.clear();
    if (!r.ok()) return r.status();
    sent += static_cast<int64_t>(r->size());
    if (!a.quiet) {
      for (const auto& rc : *r) PrintSendReceipt(rc);
    }
    return absl::OkStatus();
  };
  std::string line;
  int64_t read = 0;
  while (std::getline(std::cin, line)) {
    client::OutgoingMessage m = base;
    m.body = line;
    batch.push_back(std::move(m));
    ++read;
    if (static_cast<int>(batch.size()) >= std::max(1, a.batch)) {
      if (absl::Status s = flush(); !s.ok()) return s;
    }
  }
  if (absl::Status s = flush(); !s.ok()) return s;
  if (read == 0) return absl::InvalidArgumentError("nothing to send: give --body, --file or lines on stdin");
  if (a.quiet) std::fprintf(stderr, "sent %lld messages\n", static_cast<long long>(sent));
  return absl::OkStatus();
}

absl::Status ClusterConsume(const ClientOptions& o, const ConsumeArgs& a) {
  auto invisible = ParseDuration(a.invisible);
  if (!invisible.ok()) return invisible.status();
  auto wait = ParseDuration(a.wait);
  if (!wait.ok()) return wait.status();
  client::ClusterConsumer consumer(o, a.group);
  int got = 0;
  while (a.count <= 0 || got < a.count) {
    client::ReceiveOptions ro;
    ro.max_messages = a.count <= 0 ? 32 : std::min(32, a.count - got);
    ro.invisible_ms = *invisible;
    ro.long_poll_ms = *wait;
    ro.tag_filter = a.tag_filter;
    auto msgs = consumer.Receive(a.topic, ro);
    if (!msgs.ok()) return msgs.status();
    if (msgs->empty()) break;
    for (const auto& m : *msgs) {
      std::printf("%s attempt=%d queue=%d offset=%lld key=%s tag=%s deliver=%s handle=%s\t%s\n",
                  m.message_id.c_str(), m.delivery_attempt, m.queue_id,
                  static_cast<long long>(m.queue_offset.value()), m.key.c_str(), m.tag.c_str(),
                  FormatTimestamp(m.deliver_ms).c_str(), m.receipt_handle.c_str(),
                  m.body.c_str());
      if (a.ack) {
        if (absl::Status s = consumer.Ack(m.receipt_handle); !s.ok()) return s;
      }
      ++got;
    }
    std::fflush(stdout);
  }
  std::fprintf(stderr, "received %d message%s%s\n", got, got == 1 ? "" : "s",
               a.ack ? " (acked)" : "");
  return absl::OkStatus();
}

absl::Status ClusterRecall(const ClientOptions& o, const std::string& handle) {
  absl::Status s = client::ClusterProducer(o).Recall(handle);
  if (s.ok()) std::printf("recalled\n");
  return s;
}

absl::Status ClusterSettle(const ClientOptions& o, const SettleArgs& a, const std::string& kind) {
  client::ClusterConsumer consumer(o, a.group);
  if (kind == "ack") {
    auto results = consumer.AckBatch(a.handles);
    if (!results.ok()) return results.status();
    absl::Status first;
    for (size_t i = 0; i < results->size(); ++i) {
      const absl::Status& s = (*results)[i];
      if (s.ok()) {
        std::printf("acked %s\n", a.handles[i].c_str());
      } else {
        std::printf("not acked %s: %s\n", a.handles[i].c_str(), s.ToString().c_str());
        if (first.ok()) first = s;
      }
    }
    return first;
  }
  std::optional<int64_t> ms;
  if (!a.duration.empty()) {
    auto d = ParseDuration(a.duration);
    if (!d.ok()) return d.status();
    ms = *d;
  }
  if (kind == "nack") {
    absl::Status s = consumer.Nack(a.handles.at(0), ms);
    if (s.ok()) std::printf("nacked %s\n", a.handles.at(0).c_str());
    return s;
  }
  auto h = consumer.ChangeInvisibleDuration(a.handles.at(0), ms.value_or(30'000));
  if (!h.ok()) return h.status();
  std::printf("renewed for %s handle=%s\n", a.duration.c_str(), h->c_str());
  return absl::OkStatus();
}

}  // namespace tokimq::cli
