// tokimq-topic-cost: drives a broker (started with --manual-clock) to hold many topics, for the
// cost-per-topic figures of issue 25 (scripts/topic_cost.sh samples RSS, descriptors and files
// between the phases). Phases, each timed and printed as one "PHASE name seconds count" line:
//   create   N topics of Q queues (DELAY type)
//   send     Q delayed messages per topic in one batch (round robin: one in every queue)
//   enqueue  until the timer has linked them all
//   deliver  advance the clock past the delay; until all N*Q are in their topics
//   receive  (--receive) one receive of up to Q messages per topic, group "topic-cost"
//   groups   (--groups G) G consumer groups, each receiving one message (group g from topic
//            g mod N, on a connection of its own): G groups with one lease each
//   stats    (--stats-calls K) K Stats requests; prints "STATS ms_per_call bytes topics groups"
//   delete   (--delete) every topic
// Between phases it waits for a line on stdin when --pause is given (the script samples then).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"

namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokimq-topic-cost: many topics, a delayed message in every queue"};
  std::string addr, prefix = "tc";
  int topics = 1000, queues = 8;
  int64_t delay_ms = 60'000;
  bool receive = false, del = false, pause = false, skip_create = false;
  int groups = 0, stats_calls = 0;
  app.add_option("--addr", addr, "host:port of the broker")->required();
  app.add_option("--topics", topics, "topics")->default_val(1000);
  app.add_option("--queues", queues, "queues per topic")->default_val(8);
  app.add_option("--prefix", prefix, "topic name prefix")->default_val("tc");
  app.add_option("--delay-ms", delay_ms, "delay of each message")->default_val(60'000);
  app.add_flag("--receive", receive, "receive from every topic after delivery");
  app.add_flag("--delete", del, "delete every topic at the end");
  app.add_flag("--pause", pause, "wait for a line on stdin after each phase");
  app.add_flag("--skip-create", skip_create, "topics exist already: only receive / delete");
  app.add_option("--groups", groups, "consumer groups that each receive one message")
      ->default_val(0);
  app.add_option("--stats-calls", stats_calls, "Stats requests to time")->default_val(0);
  CLI11_PARSE(app, argc, argv);

  tokimq::client::ClientOptions opt;
  opt.broker = addr;
  opt.request_timeout_ms = 60'000;
  tokimq::client::AdminClient admin(opt);
  tokimq::client::Producer producer(opt);
  auto name = [&](int t) { return prefix + std::to_string(t); };
  auto phase = [&](const char* what, std::chrono::steady_clock::time_point t0, int64_t n) {
    std::printf("PHASE %s %.3f %lld\n", what, Since(t0), static_cast<long long>(n));
    std::fflush(stdout);
    if (pause) {
      std::string line;
      std::getline(std::cin, line);
    }
  };
  auto fail = [](const std::string& what, const absl::Status& s) {
    std::fprintf(stderr, "tokimq-topic-cost: %s: %s\n", what.c_str(), s.ToString().c_str());
    return 1;
  };

  const int64_t total = static_cast<int64_t>(topics) * queues;
  // Polls need the timer fields only: one topic page, no queues (an older broker ignores this
  // and answers everything).
  tokimq::proto::StatsRequest light;
  light.set_topic_limit(1);
  light.set_omit_queues(true);
  if (!skip_create) {
    auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < topics; ++t) {
      tokimq::proto::TopicConfig cfg;
      cfg.set_name(name(t));
      cfg.set_type(tokimq::proto::DELAY);
      cfg.set_queues(queues);
      cfg.set_max_delay_ms(2 * delay_ms);
      auto r = admin.CreateTopic(cfg);
      if (!r.ok()) return fail("create " + name(t), r.status());
    }
    phase("create", t0, topics);

    t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < topics; ++t) {
      std::vector<tokimq::client::OutgoingMessage> batch(static_cast<size_t>(queues));
      for (auto& m : batch) {
        m.topic = name(t);
        m.body = std::string(100, 'x');
        m.delay_ms = delay_ms;
      }
      auto r = producer.SendBatch(batch);
      if (!r.ok()) return fail("send " + name(t), r.status());
    }
    phase("send", t0, total);

    t0 = std::chrono::steady_clock::now();
    while (true) {
      auto st = admin.Stats(light);
      if (!st.ok()) return fail("stats", st.status());
      if (st->timer().enqueue_lag() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    phase("enqueue", t0, total);

    t0 = std::chrono::steady_clock::now();
    int64_t base = 0;
    {
      auto st = admin.Stats(light);
      if (!st.ok()) return fail("stats", st.status());
      base = st->timer().delivered();  // nothing of this run is due before the advance
    }
    auto adv = admin.AdvanceClock(delay_ms + 1000);
    if (!adv.ok()) return fail("advance-clock (start the broker with --manual-clock)",
                               adv.status());
    while (true) {
      auto st = admin.Stats(light);
      if (!st.ok()) return fail("stats", st.status());
      if (st->timer().delivered() - base >= total) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    phase("deliver", t0, total);
  }

  if (receive) {
    auto t0 = std::chrono::steady_clock::now();
    tokimq::client::SimpleConsumer consumer(opt, "topic-cost");
    tokimq::client::ReceiveOptions ro;
    ro.max_messages = queues;
    ro.long_poll_ms = 0;
    int64_t got = 0;
    for (int t = 0; t < topics; ++t) {
      auto r = consumer.Receive(name(t), ro);
      if (!r.ok()) return fail("receive " + name(t), r.status());
      got += static_cast<int64_t>(r->size());
    }
    phase("receive", t0, got);
  }
  if (groups > 0) {
    auto t0 = std::chrono::steady_clock::now();
    tokimq::client::ReceiveOptions ro;
    ro.max_messages = 1;
    ro.long_poll_ms = 0;
    int64_t got = 0;
    for (int g = 0; g < groups; ++g) {
      tokimq::client::SimpleConsumer consumer(opt, "g" + std::to_string(g));
      auto r = consumer.Receive(name(g % std::max(topics, 1)), ro);
      if (!r.ok()) return fail("receive as group g" + std::to_string(g), r.status());
      got += static_cast<int64_t>(r->size());
    }
    phase("groups", t0, got);
  }
  if (stats_calls > 0) {
    auto t0 = std::chrono::steady_clock::now();
    // Three shapes: everything (the default request), every topic without queues (the CLI), and
    // all topics in pages of 1,000 without queues.
    auto time_stats = [&](const char* label, const tokimq::proto::StatsRequest& first) -> int {
      size_t bytes = 0;
      int n_topics = 0, n_groups = 0, pages = 0;
      auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < stats_calls; ++i) {
        tokimq::proto::StatsRequest req = first;
        bytes = 0;
        n_topics = 0;
        n_groups = 0;
        pages = 0;
        // Names are [A-Za-z0-9._-]: "~" sorts after every one (an empty page once a list ended).
        while (true) {
          auto st = admin.Stats(req);
          if (!st.ok()) return fail("stats", st.status());
          bytes += st->ByteSizeLong();
          n_topics += st->topics_size();
          n_groups += st->groups_size();
          ++pages;
          if (st->next_topics_after().empty() && st->next_groups_after().empty()) break;
          req.set_topics_after(st->next_topics_after().empty() ? "~" : st->next_topics_after());
          req.set_groups_after(st->next_groups_after().empty() ? "~" : st->next_groups_after());
        }
      }
      std::printf("STATS %-12s %.1f ms/call %zu bytes %d pages %d topics %d groups\n", label,
                  1000 * Since(t) / stats_calls, bytes, pages, n_topics, n_groups);
      return 0;
    };
    tokimq::proto::StatsRequest all, no_queues, paged;
    no_queues.set_omit_queues(true);
    paged.set_omit_queues(true);
    paged.set_topic_limit(1000);
    paged.set_group_limit(1000);
    paged.set_omit_group_topics(true);
    if (time_stats("all", all) != 0 || time_stats("no-queues", no_queues) != 0 ||
        time_stats("pages-1000", paged) != 0) {
      return 1;
    }
    phase("stats", t0, stats_calls);
  }
  if (del) {
    auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < topics; ++t) {
      absl::Status s = admin.DeleteTopic(name(t));
      if (!s.ok()) return fail("delete " + name(t), s);
    }
    phase("delete", t0, topics);
  }
  return 0;
}
