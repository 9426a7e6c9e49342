// tokimq: command line client for a tokimq broker (topics, send, recall, consume, stats, admin).
// Exit code 0 on success; on failure one line "tokimq: <error>" on stderr and exit code 1
// (2 for usage errors).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "common/duration.h"
#include "common/names.h"
#include "common/namespace.h"
#include "tokimq/auth_commands.h"
#include "tokimq/cluster_commands.h"
#include "tokimq/commands.h"
#include "tokimq/group_commands.h"

namespace {

// The name rule (common/names.h) as CLI11 validators: a bad name is a usage error naming the
// rule, before anything is sent to the broker.
CLI::Validator NameCheck(absl::Status (*validate)(std::string_view), const char* what) {
  return CLI::Validator(
      [validate](std::string& v) -> std::string {
        absl::Status s = validate(v);
        return s.ok() ? std::string() : std::string(s.message());
      },
      what);
}
const CLI::Validator kGroupName = NameCheck(&tokimq::ValidateGroupName, "GROUP");
const CLI::Validator kTopicName = NameCheck(&tokimq::ValidateTopicName, "TOPIC");
// Topics consumers read: also a group's retry or DLQ topic ("%DLQ%<group>").
const CLI::Validator kReadTopic = NameCheck(&tokimq::ValidateDestination, "TOPIC");

}  // namespace

int main(int argc, char** argv) {
  using namespace tokimq::cli;
  CLI::App app{"tokimq: command line client for the tokimq delay-message broker"};
  app.set_version_flag("--version", std::string("tokimq ") + TOKIMQ_VERSION);
  app.require_subcommand(1);
  tokimq::client::ClientOptions opts;
  std::string timeout = "10s";
  app.add_option("--broker", opts.broker, "broker address host:port")
      ->default_val("127.0.0.1:10911");
  app.add_option("--timeout", timeout,
                 "per-request timeout, also bounding each connect (e.g. 10s); a cluster send "
                 "retries up to --failover-wait")
      ->default_val("10s");
  app.add_option("--namespace", opts.namespace_,
                 "RocketMQ namespace: topics and groups named by this command are those of the "
                 "namespace (docs/protocol.md \"Namespaces\")")
      ->check(NameCheck(&tokimq::ValidateNamespace, "NAMESPACE"));

  std::function<absl::Status()> action;
  AddAuthCommands(&app, &opts, &action);  // --access-key, --secret-key, user ..., acl ...
  AddGroupCommands(&app, &opts, &action);  // group create|update|describe

  // topic ...
  CLI::App* topic = app.add_subcommand("topic", "create, update, list, describe, delete topics");
  topic->require_subcommand(1);
  TopicArgs targs;
  auto add_topic_opts = [&](CLI::App* cmd, bool create) {
    cmd->add_option("--name", targs.name, "topic name")->required()->check(kTopicName);
    if (create) {
      cmd->add_option("--type", targs.type, "normal | delay | fifo | transaction")
          ->default_val("normal");
    }
    cmd->add_option("--queues", targs.queues, "number of queues (default 8)");
    cmd->add_option("--max-delay", targs.max_delay, "longest accepted delay, e.g. 7d (default 3d)");
    cmd->add_option("--retention", targs.retention, "retention, e.g. 3d (default: broker's)");
  };
  CLI::App* tcreate = topic->add_subcommand("create", "create a topic");
  add_topic_opts(tcreate, true);
  tcreate->add_option("--brokers", targs.brokers,
                      "cluster: host the topic on these brokers, b1,b2 (default: all live)")
      ->delimiter(',');
  tcreate->callback([&] { action = [&] { return TopicCreate(opts, targs); }; });
  CLI::App* tupdate = topic->add_subcommand("update", "change queues / max delay / retention");
  add_topic_opts(tupdate, false);
  tupdate->add_option("--add-broker", targs.add_brokers,
                      "cluster: also host the topic on this broker (repeatable, or b3,b4)")
      ->delimiter(',');
  tupdate->callback([&] { action = [&] { return TopicUpdate(opts, targs); }; });
  topic->add_subcommand("list", "list topics")->callback([&] {
    action = [&] { return TopicList(opts); };
  });
  std::string tname;
  CLI::App* tdesc = topic->add_subcommand("describe", "show a topic and its queues");
  tdesc->add_option("name,--name", tname, "topic name")->required()->check(kReadTopic);
  tdesc->callback([&] { action = [&] { return TopicDescribe(opts, tname); }; });
  CLI::App* tdel = topic->add_subcommand("delete", "delete a topic (data ages out)");
  tdel->add_option("name,--name", tname, "topic name")->required()->check(kTopicName);
  tdel->callback([&] { action = [&] { return TopicDelete(opts, tname); }; });

  // send
  SendArgs sargs;
  std::string body;
  CLI::App* send = app.add_subcommand(
      "send", "send one message (--body / --file) or one per line of stdin");
  send->add_option("--topic", sargs.topic, "topic")->required()->check(kTopicName);
  auto* delay = send->add_option("--delay", sargs.delay, "deliver after this long, e.g. 30s");
  send->add_option("--at", sargs.at, "deliver at this time, e.g. 2026-12-01T10:00:00Z")
      ->excludes(delay);
  send->add_option("--key", sargs.key, "message key (queue selection; FIFO group if no --message-group)");
  send->add_option("--message-group", sargs.message_group,
                   "FIFO topics: message group (same group -> consumed in send order, one at a time)");
  send->add_option("--tag", sargs.tag, "tag");
  send->add_option("--property,-p", sargs.properties, "property key=value (repeatable)");
  auto* body_opt = send->add_option("--body", body, "message body");
  send->add_option("--file", sargs.file, "read the body from this file")->excludes(body_opt);
  send->add_option("--batch", sargs.batch, "messages per request for stdin lines")
      ->default_val(64);
  send->add_flag("--quiet,-q", sargs.quiet, "print only the summary");
  send->add_option("--failover-wait", sargs.failover_wait,
                   "cluster: how long a send retries while its broker group has no leader "
                   "(--timeout is per request; 0s: fail at once)")
      ->default_val("15s");
  send->add_flag("--transactional", sargs.transactional,
                 "TRANSACTION topics: store as a half message (invisible until `tokimq tx "
                 "commit`); prints the transaction id");
  send->callback([&] {
    if (send->count("--body") > 0) sargs.body = body;
    action = [&] { return Send(opts, sargs); };
  });

  // recall
  std::string handle;
  CLI::App* recall = app.add_subcommand("recall", "cancel a scheduled message");
  recall->add_option("handle", handle, "recall handle printed by send")->required();
  recall->callback([&] { action = [&] { return Recall(opts, handle); }; });

  // consume
  ConsumeArgs cargs;
  CLI::App* consume = app.add_subcommand("consume", "receive messages as a consumer group");
  consume->add_option("--group", cargs.group, "consumer group")->required()->check(kGroupName);
  consume->add_option("--topic", cargs.topic, "topic")->required()->check(kReadTopic);
  consume->add_option("--invisible", cargs.invisible, "lease (invisible duration)")
      ->default_val("30s");
  consume->add_option("--wait", cargs.wait, "long poll per receive; stop when it yields nothing")
      ->default_val("5s");
  consume->add_option("--tag-filter", cargs.tag_filter, "tags, e.g. a||b");
  consume->add_option("--sql-filter", cargs.sql_filter,
                      "SQL92 property filter, e.g. \"region = 'eu' AND amount > 100\"");
  consume->add_flag("--ack", cargs.ack, "ACK each message after printing it");
  consume->add_flag("--props", cargs.props,
                    "also print each message's properties, one '  prop KEY=VALUE' line each "
                    "(control bytes and backslash as \\xHH)");
  consume->add_option("--count", cargs.count, "stop after N messages (0: until none ready)")
      ->default_val(1);
  consume->callback([&] { action = [&] { return Consume(opts, cargs); }; });

  // ack / nack / renew by receipt handle
  SettleArgs settle;
  CLI::App* ack = app.add_subcommand("ack", "ACK deliveries by receipt handle");
  ack->add_option("--group", settle.group, "consumer group")->required()->check(kGroupName);
  ack->add_option("handles", settle.handles, "receipt handles (handle=... of consume)")
      ->required();
  ack->callback([&] { action = [&] { return AckHandles(opts, settle); }; });
  CLI::App* nack = app.add_subcommand("nack", "end a lease now; the message comes back later");
  nack->add_option("--group", settle.group, "consumer group")->required()->check(kGroupName);
  nack->add_option("handle", settle.handles, "receipt handle")->required()->expected(1);
  nack->add_option("--delay", settle.duration, "redeliver after this long (default: backoff)");
  nack->callback([&] { action = [&] { return NackHandle(opts, settle); }; });
  CLI::App* renew = app.add_subcommand("renew", "extend a lease (change invisible duration)");
  renew->add_option("--group", settle.group, "consumer group")->required()->check(kGroupName);
  renew->add_option("handle", settle.handles, "receipt handle")->required()->expected(1);
  renew->add_option("--invisible", settle.duration, "new invisible duration from now, e.g. 60s")
      ->required();
  renew->callback([&] { action = [&] { return RenewHandle(opts, settle); }; });

  StatsArgs stats_args;
  CLI::App* stats = app.add_subcommand("stats", "topic depths, timer and group gauges");
  stats
      ->add_option("--topic-limit", stats_args.topic_limit,
                   "list at most this many topics (0: all); a last line names the next page")
      ->check(CLI::NonNegativeNumber);
  stats->add_option("--after", stats_args.topics_after,
                    "list topics whose names sort after this one");
  stats
      ->add_option("--group-limit", stats_args.group_limit,
                   "list at most this many groups (0: all); a last line names the next page")
      ->check(CLI::NonNegativeNumber);
  stats->add_option("--groups-after", stats_args.groups_after,
                    "list groups whose names sort after this one");
  stats->callback([&] { action = [&] { return Stats(opts, stats_args); }; });

  // tx commit / rollback (docs/transactions.md)
  TxEndArgs tx_args;
  CLI::App* tx = app.add_subcommand("tx", "end a transactional (half) message");
  tx->require_subcommand(1);
  for (bool commit : {true, false}) {
    CLI::App* end = tx->add_subcommand(commit ? "commit" : "rollback",
                                       commit ? "make the half message visible in its topic"
                                              : "discard the half message");
    end->add_option("--topic", tx_args.topic, "topic")->required()->check(kTopicName);
    end->add_option("--id", tx_args.message_id, "message id printed by send")->required();
    end->add_option("--tx", tx_args.transaction_id, "transaction id printed by send")->required();
    end->callback([&, commit] {
      tx_args.commit = commit;
      action = [&] { return TxEnd(opts, tx_args); };
    });
  }

  CLI::App* timer = app.add_subcommand("timer", "timer store operations");
  timer->require_subcommand(1);
  timer->add_subcommand("checkpoint", "flush the timer log and wheel, write a checkpoint")
      ->callback([&] { action = [&] { return TimerCheckpoint(opts); }; });

  CLI::App* cluster = app.add_subcommand("cluster", "a tokimq cluster (docs/cluster.md)");
  cluster->require_subcommand(1);
  cluster->add_subcommand("status", "members, addresses, health, topics and placement")
      ->callback([&] { action = [&] { return ClusterStatus(opts); }; });

  CLI::App* admin = app.add_subcommand("admin", "operator requests");
  admin->require_subcommand(1);
  std::string advance;
  CLI::App* adv = admin->add_subcommand(
      "advance-clock", "move a --manual-clock broker's clock forward, e.g. 8d");
  adv->add_option("duration", advance, "how far")->required();
  adv->callback([&] { action = [&] { return AdvanceClock(opts, advance); }; });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto t = tokimq::ParseDuration(timeout);
  if (!t.ok() || *t <= 0) {
    std::fprintf(stderr, "tokimq: bad --timeout '%s'\n", timeout.c_str());
    return 2;
  }
  opts.request_timeout_ms = *t;
  // Connecting (TCP, TLS and the handshake request) gets at most as long as a request: a
  // frozen broker accepts connections (the kernel does) and never answers the handshake.
  opts.connect_timeout_ms = std::min(opts.connect_timeout_ms, *t);
  opts.client_id = "tokimq-cli";
  absl::Status s = action ? action() : absl::InvalidArgumentError("no command");
  if (!s.ok()) {
    std::string msg(s.message());
    for (char& c : msg) {
      if (c == '\n') c = ' ';
    }
    std::fprintf(stderr, "tokimq: %s\n", msg.empty() ? s.ToString().c_str() : msg.c_str());
    return 1;
  }
  return 0;
}
