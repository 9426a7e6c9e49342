#include "tokimq/commands.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "tokimq/cluster_commands.h"
#include "fmt/format.h"
#include "common/duration.h"
#include "common/property_keys.h"

namespace tokimq::cli {
namespace {

// `s` with control bytes (and the backslash) written as \xHH: one line, no terminal control
// bytes, unambiguous. Other bytes as they are (property values are UTF-8: the protocol's
// strings).
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

using client::AdminClient;
using client::ClientOptions;

const char* TypeName(proto::TopicType t) {
  switch (t) {
    case proto::NORMAL:
      return "NORMAL";
    case proto::DELAY:
      return "DELAY";
    case proto::FIFO:
      return "FIFO";
    case proto::TRANSACTION:
      return "TRANSACTION";
    default:
      return "?";
  }
}

absl::StatusOr<proto::TopicType> ParseType(std::string t) {
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "normal") return proto::NORMAL;
  if (t == "delay") return proto::DELAY;
  if (t == "fifo") return proto::FIFO;
  if (t == "transaction") return proto::TRANSACTION;
  if (t.empty()) return proto::TOPIC_TYPE_UNSPECIFIED;
  return absl::InvalidArgumentError("unknown topic type '" + t +
                                    "' (normal, delay, fifo, transaction)");
}

absl::StatusOr<int64_t> OptDuration(const std::string& text) {
  if (text.empty()) return 0;
  return ParseDuration(text);
}

absl::StatusOr<proto::TopicConfig> ToTopic(const TopicArgs& a) {
  proto::TopicConfig t;
  t.set_name(a.name);
  auto type = ParseType(a.type);
  if (!type.ok()) return type.status();
  t.set_type(*type);
  t.set_queues(a.queues);
  auto max_delay = OptDuration(a.max_delay);
  if (!max_delay.ok()) return max_delay.status();
  t.set_max_delay_ms(*max_delay);
  auto retention = OptDuration(a.retention);
  if (!retention.ok()) return retention.status();
  t.set_retention_ms(*retention);
  return t;
}

void PrintTopic(const proto::TopicConfig& t) {
  std::printf("%-32s %-11s queues=%-4d max_delay=%-8s retention=%s\n", t.name().c_str(),
              TypeName(t.type()), t.queues(), FormatDuration(t.max_delay_ms()).c_str(),
              FormatDuration(t.retention_ms()).c_str());
}

}  // namespace

absl::Status TopicCreate(const ClientOptions& o, const TopicArgs& a) {
  auto topic = ToTopic(a);
  if (!topic.ok()) return topic.status();
  auto created = AdminClient(o).CreateTopic(*topic, a.brokers);
  if (!created.ok()) return created.status();
  std::printf("created ");
  PrintTopic(*created);
  return absl::OkStatus();
}

absl::Status TopicUpdate(const ClientOptions& o, const TopicArgs& a) {
  TopicArgs args = a;
  args.type = "";
  auto topic = ToTopic(args);
  if (!topic.ok()) return topic.status();
  auto updated = AdminClient(o).UpdateTopic(*topic, a.add_brokers);
  if (!updated.ok()) return updated.status();
  std::printf("updated ");
  PrintTopic(updated->topic());
  return absl::OkStatus();
}

absl::Status TopicList(const ClientOptions& o) {
  auto topics = AdminClient(o).ListTopics();
  if (!topics.ok()) return topics.status();
  for (const auto& t : *topics) PrintTopic(t);
  return absl::OkStatus();
}

absl::Status TopicDescribe(const ClientOptions& o, const std::string& name) {
  auto d = AdminClient(o).DescribeTopic(name);
  if (!d.ok()) return d.status();
  PrintTopic(d->topic());
  for (const auto& q : d->queues()) {
    std::printf("  queue %-4d min_offset=%-10lld max_offset=%lld\n", q.queue_id(),
                static_cast<long long>(q.min_offset()), static_cast<long long>(q.max_offset()));
  }
  return absl::OkStatus();
}

absl::Status TopicDelete(const ClientOptions& o, const std::string& name) {
  absl::Status s = AdminClient(o).DeleteTopic(name);
  if (s.ok()) std::printf("deleted %s\n", name.c_str());
  return s;
}

void PrintSendReceipt(const client::SendReceipt& r) {
  std::string where = "topic=" + r.topic;
  if (!r.broker.empty()) where += " broker=" + r.broker;
  where += " queue=" + std::to_string(r.queue_id);
  if (!r.delayed) where += " offset=" + std::to_string(r.queue_offset.value());
  std::printf("sent %s %s deliver_at=%s%s%s\n", r.message_id.c_str(), where.c_str(),
              FormatTimestamp(r.deliver_at_ms).c_str(), r.recall_handle.empty() ? "" : " recall=",
              r.recall_handle.c_str());
}

absl::Status Send(const ClientOptions& o, const SendArgs& a) {
  client::OutgoingMessage base;
  base.topic = a.topic;
  base.key = a.key;
  base.message_group = a.message_group;
  base.tag = a.tag;
  for (const std::string& kv : a.properties) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError("property '" + kv + "' is not key=value");
    }
    base.properties[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!a.delay.empty() && !a.at.empty()) {
    return absl::InvalidArgumentError("--delay and --at are exclusive");
  }
  if (!a.delay.empty()) {
    auto d = ParseDuration(a.delay);
    if (!d.ok()) return d.status();
    base.delay_ms = *d;
  }
  if (!a.at.empty()) {
    auto t = ParseTimestamp(a.at);
    if (!t.ok()) return t.status();
    base.deliver_at_ms = *t;
  }
  absl::StatusOr<bool> in_cluster = InCluster(o);
  if (!in_cluster.ok()) return in_cluster.status();
  if (*in_cluster) {  // --broker is one broker of a cluster: route (cluster_commands.h)
    std::string text;
    if (a.body) text = *a.body;
    if (!a.body && !a.file.empty()) {
      std::ifstream in(a.file, std::ios::binary);
      if (!in) return absl::NotFoundError("cannot read " + a.file);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    return ClusterSend(o, a, base, a.body || !a.file.empty() ? &text : nullptr);
  }
  client::Producer producer(o);
  auto print = [](const client::SendReceipt& r) { PrintSendReceipt(r); };
  if (a.body || !a.file.empty()) {
    client::OutgoingMessage m = base;
    if (a.body) {
      m.body = *a.body;
    } else {
      std::error_code ec;
      if (std::filesystem::is_directory(a.file, ec))
        return absl::InvalidArgumentError("cannot read " + a.file + ": is a directory");
      std::ifstream in(a.file, std::ios::binary);
      if (!in) return absl::NotFoundError("cannot read " + a.file);
      std::stringstream ss;
      ss << in.rdbuf();
      if (in.bad()) return absl::InternalError("cannot read " + a.file);
      m.body = ss.str();
    }
    if (a.transactional) return SendTransactional(o, a, m);
    auto r = producer.Send(m);
    if (!r.ok()) return r.status();
    print(*r);
    return absl::OkStatus();
  }

  if (a.transactional) {
    return absl::InvalidArgumentError("--transactional sends one message: give --body or --file");
  }
  // One message per stdin line, sent in pipelined batches with a bounded window. Pipelined
  // requests may be stored in any order, so for a FIFO topic (or an explicit message group)
  // one request is in flight at a time: lines keep their order within the group.
  bool ordered = !a.message_group.empty();
  if (!ordered) {
    auto d = AdminClient(o).DescribeTopic(a.topic);
    ordered = d.ok() && d->topic().type() == proto::FIFO;
  }
  const int kWindow = ordered ? 1 : 16;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  int64_t sent = 0, read = 0;
  absl::Status first_error;
  auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  bool progress_shown = false;
  auto flush = [&](std::vector<client::OutgoingMessage> batch) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return in_flight < kWindow; });
    ++in_flight;
    lock.unlock();
    producer.SendBatchAsync(batch, [&](absl::StatusOr<std::vector<client::SendReceipt>> r) {
      std::lock_guard<std::mutex> lock(mu);
      if (!r.ok()) {
        if (first_error.ok()) first_error = r.status();
      } else {
        sent += static_cast<int64_t>(r->size());
        if (!a.quiet) {
          for (const auto& rc : *r) print(rc);
        }
      }
      --in_flight;
      cv.notify_all();
    });
  };
  std::vector<client::OutgoingMessage> batch;
  std::string line;
  while (std::getline(std::cin, line)) {
    client::OutgoingMessage m = base;
    m.body = line;
    batch.push_back(std::move(m));
    ++read;
    if (static_cast<int>(batch.size()) >= std::max(1, a.batch)) {
      flush(std::move(batch));
      batch.clear();
      std::lock_guard<std::mutex> lock(mu);
      if (!first_error.ok()) break;
      auto now = std::chrono::steady_clock::now();
      if (now - last_progress >= std::chrono::seconds(1)) {
        last_progress = now;
        double secs = std::chrono::duration<double>(now - start).count();
        std::fprintf(stderr, "\rsent %lld messages (%.0f/s)", static_cast<long long>(sent),
                     sent / std::max(secs, 1e-3));
        progress_shown = true;
      }
    }
  }
  if (!batch.empty() && first_error.ok()) flush(std::move(batch));
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return in_flight == 0; });
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (progress_shown || a.quiet) {
    std::fprintf(stderr, "%ssent %lld of %lld messages in %.2f s (%.0f/s)\n",
                 progress_shown ? "\r" : "", static_cast<long long>(sent),
                 static_cast<long long>(read), secs, sent / std::max(secs, 1e-3));
  }
  if (read == 0) return absl::InvalidArgumentError("nothing to send: give --body, --file or lines on stdin");
  return first_error;
}

absl::Status Recall(const ClientOptions& o, const std::string& handle) {
  if (IsClusterHandle(handle)) return ClusterRecall(o, handle);
  absl::Status s = client::Producer(o).Recall(handle);
  if (s.ok()) std::printf("recalled\n");
  return s;
}

absl::Status AckHandles(const ClientOptions& o, const SettleArgs& a) {
  if (!a.handles.empty() && IsClusterHandle(a.handles[0])) return ClusterSettle(o, a, "ack");
  client::SimpleConsumer consumer(o, a.group);
  auto results = consumer.AckBatch(a.handles);
  if (!results.ok()) return results.status();
  absl::Status first;
  for (size_t i = 0; i < results->size() && i < a.handles.size(); ++i) {
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

absl::Status NackHandle(const ClientOptions& o, const SettleArgs& a) {
  if (IsClusterHandle(a.handles.at(0))) return ClusterSettle(o, a, "nack");
  std::optional<int64_t> delay;
  if (!a.duration.empty()) {
    auto d = ParseDuration(a.duration);
    if (!d.ok()) return d.status();
    delay = *d;
  }
  absl::Status s = client::SimpleConsumer(o, a.group).Nack(a.handles.at(0), delay);
  if (s.ok()) std::printf("nacked %s\n", a.handles.at(0).c_str());
  return s;
}

absl::Status RenewHandle(const ClientOptions& o, const SettleArgs& a) {
  if (IsClusterHandle(a.handles.at(0))) return ClusterSettle(o, a, "renew");
  auto d = ParseDuration(a.duration);
  if (!d.ok()) return d.status();
  auto h = client::SimpleConsumer(o, a.group).ChangeInvisibleDuration(a.handles.at(0), *d);
  if (!h.ok()) return h.status();
  std::printf("renewed for %s handle=%s\n", a.duration.c_str(), h->c_str());
  return absl::OkStatus();
}

absl::Status Consume(const ClientOptions& o, const ConsumeArgs& a) {
  auto invisible = ParseDuration(a.invisible);
  if (!invisible.ok()) return invisible.status();
  auto wait = ParseDuration(a.wait);
  if (!wait.ok()) return wait.status();
  absl::StatusOr<bool> in_cluster = InCluster(o);
  if (!in_cluster.ok()) return in_cluster.status();
  if (*in_cluster) return ClusterConsume(o, a);  // any broker of a cluster: routed
  client::SimpleConsumer consumer(o, a.group);
  int got = 0;
  while (a.count <= 0 || got < a.count) {
    client::ReceiveOptions ro;
    ro.max_messages = a.count <= 0 ? 32 : std::min(32, a.count - got);
    ro.invisible_ms = *invisible;
    ro.long_poll_ms = *wait;
    ro.tag_filter = a.tag_filter;
    ro.sql_filter = a.sql_filter;
    auto msgs = consumer.Receive(a.topic, ro);
    if (!msgs.ok()) return msgs.status();
    if (msgs->empty()) break;
    for (const auto& m : *msgs) {
      auto group = m.properties.find(prop::kMessageGroup);
      std::string group_field =
          group == m.properties.end() ? "" : " group=" + group->second;
      std::printf(
          "%s attempt=%d queue=%d offset=%lld key=%s%s tag=%s deliver=%s handle=%s\t%s\n",
          m.message_id.c_str(), m.delivery_attempt, m.queue_id,
          static_cast<long long>(m.queue_offset.value()), m.key.c_str(), group_field.c_str(),
          m.tag.c_str(), FormatTimestamp(m.deliver_ms).c_str(), m.receipt_handle.c_str(),
          m.body.c_str());
      if (a.props) {
        for (const auto& [k, v] : m.properties) {
          std::printf("  prop %s=%s\n", Printable(k).c_str(), Printable(v).c_str());
        }
      }
      if (a.ack) {
        absl::Status s = consumer.Ack(m.receipt_handle);
        if (!s.ok()) return s;
      }
      ++got;
    }
    std::fflush(stdout);
  }
  std::fprintf(stderr, "received %d message%s%s\n", got, got == 1 ? "" : "s",
               a.ack ? " (acked)" : "");
  return absl::OkStatus();
}

absl::Status Stats(const ClientOptions& o, const StatsArgs& a) {
  proto::StatsRequest req;
  req.set_topic_limit(a.topic_limit);
  req.set_topics_after(a.topics_after);
  req.set_group_limit(a.group_limit);
  req.set_groups_after(a.groups_after);
  req.set_omit_queues(true);  // only depths are printed
  auto st = AdminClient(o).Stats(req);
  if (!st.ok()) return st.status();
  std::printf("now %s  commitlog min=%lld max=%lld flushed=%lld\n",
              FormatTimestamp(st->now_ms()).c_str(),
              static_cast<long long>(st->commitlog_min_offset()),
              static_cast<long long>(st->commitlog_max_offset()),
              static_cast<long long>(st->commitlog_flushed_offset()));
  // Fsyncs per acknowledged send under flush = "sync": syncs / durable_waits (docs/protocol.md
  // "Durable sends").
  std::printf("commitlog fsyncs: syncs=%lld sync_rounds=%lld durable_waits=%lld\n",
              static_cast<long long>(st->commitlog_syncs()),
              static_cast<long long>(st->commitlog_sync_rounds()),
              static_cast<long long>(st->commitlog_durable_waits()));
  std::printf("retention: age=%s runs=%lld deleted_segments=%lld last_run=%s\n",
              FormatDuration(st->retention_ms()).c_str(),
              static_cast<long long>(st->retention_runs()),
              static_cast<long long>(st->retention_deleted_segments()),
              st->retention_last_run_ms() > 0
                  ? FormatTimestamp(st->retention_last_run_ms()).c_str()
                  : "never");
  std::printf(
      "retention moves: pinned_bytes=%lld moved=%lld moved_bytes=%lld aborts=%lld "
      "oldest_pending_segment_age=%s\n",
      static_cast<long long>(st->timer().retention_pinned_bytes()),
      static_cast<long long>(st->timer().retention_moved()),
      static_cast<long long>(st->timer().retention_moved_bytes()),
      static_cast<long long>(st->timer().retention_move_aborts()),
      FormatDuration(st->timer().oldest_pending_segment_age_ms()).c_str());
  const char* disk_state = st->disk_state() == proto::DISK_ABOVE_WATERMARK ? "above_watermark"
                           : st->disk_state() == proto::DISK_FULL          ? "full"
                                                                           : "ok";
  std::printf(
      "disk: state=%s free=%llu total=%llu watermark_free=%llu sends_refused=%lld "
      "no_space_errors=%lld\n",
      disk_state, static_cast<unsigned long long>(st->disk_free_bytes()),
      static_cast<unsigned long long>(st->disk_total_bytes()),
      static_cast<unsigned long long>(st->disk_watermark_free_bytes()),
      static_cast<long long>(st->sends_refused()),
      static_cast<long long>(st->disk_no_space_errors()));
  std::printf("topics:\n");
  for (const auto& t : st->topics()) {
    std::printf("  %-32s %-11s depth=%lld\n", t.name().c_str(), TypeName(t.type()),
                static_cast<long long>(t.depth()));
  }
  if (!st->next_topics_after().empty()) {
    std::printf("  ... %d topics in all; next page: --after %s\n", st->topic_count(),
                st->next_topics_after().c_str());
  }
  const auto& tm = st->timer();
  std::printf("timer: pending=%lld delivered=%lld recalled=%lld rolled=%lld dropped=%lld "
              "enqueue_lag=%lld dequeue_lag=%lldms lateness p50=%lldms p99=%lldms max=%lldms\n",
              static_cast<long long>(tm.pending()), static_cast<long long>(tm.delivered()),
              static_cast<long long>(tm.recalled()), static_cast<long long>(tm.rolled()),
              static_cast<long long>(tm.dropped()), static_cast<long long>(tm.enqueue_lag()),
              static_cast<long long>(tm.dequeue_lag_ms()),
              static_cast<long long>(tm.lateness_p50_ms()),
              static_cast<long long>(tm.lateness_p99_ms()),
              static_cast<long long>(tm.lateness_max_ms()));
  const char* buckets[] = {"<=5s", "<=1m", "<=5m", "<=15m", "<=1h", "<=4h", "<=8h", "<=1d", ">1d"};
  std::printf("  pending by remaining delay:");
  for (int i = 0; i < tm.pending_by_bucket_size() && i < 9; ++i) {
    std::printf(" %s=%lld", buckets[i], static_cast<long long>(tm.pending_by_bucket(i)));
  }
  std::printf("\ngroups:\n");
  for (const auto& g : st->groups()) {
    std::string topics;
    for (const auto& t : g.topics()) topics += (topics.empty() ? "" : ",") + t;
    const char* order = g.delivery_order() == proto::ORDERLY        ? "orderly"
                        : g.delivery_order() == proto::CONCURRENTLY ? "concurrently"
                                                                    : "unset";
    std::printf("  %-24s in_flight=%lld parked=%lld dlq_depth=%lld topics=%s order=%s\n",
                g.group().c_str(), static_cast<long long>(g.in_flight()),
                static_cast<long long>(g.parked()), static_cast<long long>(g.dlq_depth()),
                topics.c_str(), order);
  }
  if (!st->next_groups_after().empty()) {
    std::printf("  ... %d groups in all; next page: --groups-after %s\n", st->group_count(),
                st->next_groups_after().c_str());
  }
  // Undeliverable messages (docs/operations.md "Poison messages").
  std::printf("poison: poison_parked=%lld (by the timer since start) stored=%lld in %s\n",
              static_cast<long long>(tm.poison_parked()),
              static_cast<long long>(st->poison_depth()), "tokimq_sys_poison");
  PrintTransactionStats(st->transactions());
  return absl::OkStatus();
}

absl::Status TimerCheckpoint(const ClientOptions& o) {
  absl::Status s = AdminClient(o).TimerCheckpoint();
  if (s.ok()) std::printf("timer checkpoint written\n");
  return s;
}

absl::Status AdvanceClock(const ClientOptions& o, const std::string& duration) {
  auto ms = ParseDuration(duration);
  if (!ms.ok()) return ms.status();
  auto now = AdminClient(o).AdvanceClock(*ms);
  if (!now.ok()) return now.status();
  std::printf("broker clock now %s\n", FormatTimestamp(*now).c_str());
  return absl::OkStatus();
}

}  // namespace tokimq::cli
