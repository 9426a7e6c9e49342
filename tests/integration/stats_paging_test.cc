// Stats pages its topic and group lists (issue 25: at 50,000 topics one answer was 3.5 MB, and a
// group that received from every topic listed all 50,000 names in every answer).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::AdminClient;

TEST(StatsPagingTest, PagesOfTopicsAndGroupsAddUpToTheWholeLists) {
  tokimq::testing::TempDir dir;
  tokimq::testing::BrokerProcess broker(dir.Join("data"));
  ASSERT_TRUE(broker.Start());
  AdminClient admin(broker.Options());
  for (const char* name : {"pa", "pb", "pc", "pd", "pe"}) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(proto::NORMAL);
    t.set_queues(2);
    auto created = admin.CreateTopic(t);
    ASSERT_TRUE(created.ok()) << name << ": " << created.status();
  }
  client::Producer producer(broker.Options());
  client::OutgoingMessage m;
  m.topic = "pc";
  m.body = "x";
  ASSERT_TRUE(producer.Send(m).ok());
  for (const char* g : {"g1", "g2", "g3"}) {
    client::SimpleConsumer c(broker.Options(), g);
    client::ReceiveOptions ro;
    ro.long_poll_ms = 0;
    ASSERT_TRUE(c.Receive("pa", ro).ok());
    ASSERT_TRUE(c.Receive("pb", ro).ok());
  }

  // The default request: every topic with its queues, every group with its topics (as before).
  auto all = admin.Stats();
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> topics, groups;
  for (const auto& t : all->topics()) topics.push_back(t.name());
  for (const auto& g : all->groups()) groups.push_back(g.group());
  ASSERT_GE(topics.size(), 5u);
  ASSERT_EQ(groups, (std::vector<std::string>{"g1", "g2", "g3"}));
  for (const auto& t : all->topics()) {
    if (t.name() == "pa") {
      EXPECT_EQ(t.queues_size(), 2);
    }
  }
  EXPECT_EQ(all->groups(0).topics_size(), 2);
  EXPECT_TRUE(all->next_topics_after().empty());
  EXPECT_EQ(all->topic_count(), static_cast<int>(topics.size()));
  EXPECT_EQ(all->group_count(), 3);

  proto::StatsRequest req;
  req.set_topic_limit(2);
  req.set_group_limit(2);
  req.set_omit_queues(true);
  req.set_omit_group_topics(true);
  std::vector<std::string> paged_topics, paged_groups;
  int pages = 0;
  while (true) {
    auto st = admin.Stats(req);
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_LE(st->topics_size(), 2);
    ASSERT_LE(st->groups_size(), 2);
    for (const auto& t : st->topics()) {
      paged_topics.push_back(t.name());
      EXPECT_EQ(t.queues_size(), 0);
      if (t.name() == "pc") {
        EXPECT_EQ(t.depth(), 1);  // depth is still set
      }
    }
    for (const auto& g : st->groups()) {
      paged_groups.push_back(g.group());
      EXPECT_EQ(g.topics_size(), 0);
    }
    EXPECT_EQ(st->topic_count(), static_cast<int>(topics.size()));
    ++pages;
    if (st->next_topics_after().empty() && st->next_groups_after().empty()) break;
    ASSERT_LT(pages, 20);
    // A list that ended is asked for the names after "~" (after every valid name): nothing.
    req.set_topics_after(st->next_topics_after().empty() ? "~" : st->next_topics_after());
    req.set_groups_after(st->next_groups_after().empty() ? "~" : st->next_groups_after());
  }
  EXPECT_EQ(paged_topics, topics);
  EXPECT_EQ(paged_groups, groups);
  EXPECT_EQ(pages, static_cast<int>((topics.size() + 1) / 2));

  req.set_topic_limit(-1);
  EXPECT_EQ(admin.Stats(req).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broker.Stop(), 0);
}

}  // namespace
}  // namespace tokimq
