// Poison messages: a due message the timer cannot deliver is parked in
// tokimq_sys_poison, counted once, and never holds up the messages around it.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "common/names.h"
#include "timer_env.h"

namespace tokimq::testing {
namespace {

class TimerPoisonTest : public ::testing::TestWithParam<int64_t> {
 protected:
  int64_t P() const { return GetParam(); }

  // A timer-topic record as a broker before the name rule could write it (Schedule now refuses
  // such a destination): deliver at `deliver_ms` to `real_topic`, queue id text `qid`.
  static void PutLegacyTimerRecord(TimerEnv& env, const std::string& id, int64_t deliver_ms,
                                   const std::string& real_topic, const std::string& qid = "0") {
    Message m;
    m.topic = kTimerTopic;
    m.queue_id = 0;
    m.born_ms = env.clock().NowMs();
    m.body = id;
    m.properties[prop::kMessageId] = id;
    m.properties[prop::kDeliverMs] = std::to_string(deliver_ms);
    m.properties[prop::kRealTopic] = real_topic;
    m.properties[prop::kRealQueueId] = qid;
    auto put = env.ms().Put(std::move(m));
    ASSERT_TRUE(put.ok()) << put.status();
  }

  static std::vector<Message> Parked(TimerEnv& env) { return env.Delivered(kPoisonTopic); }

  static const Message* ParkedById(const std::vector<Message>& parked, const std::string& id) {
    for (const Message& m : parked) {
      auto it = m.properties.find(prop::kMessageId);
      if (it != m.properties.end() && it->second == id) return &m;
    }
    return nullptr;
  }

  static std::string Prop(const Message& m, const std::string& key) {
    auto it = m.properties.find(key);
    return it == m.properties.end() ? "<absent>" : it->second;
  }
};

TEST_P(TimerPoisonTest, BadDestinationIsParkedOnceAndTheRestIsDeliveredOnTime) {
  TimerEnv env(P());
  env.Open();
  const int64_t due = (env.clock().NowMs() / P() + 3) * P() + 7;
  env.Send("a", due);
  PutLegacyTimerRecord(env, "bad", due + 1, "%RETRY%sp ace");  // a name with a space
  PutLegacyTimerRecord(env, "noqid", due + 1, "t", "zero");     // REAL_QID not an integer
  env.Send("b", due + 2);                                       // same slot, after them
  env.Send("c", due + 5 * P());                                 // a later slot
  env.Ack();
  env.CleanRestart();  // the legacy records come from "an older broker"

  env.AdvanceTo(due);
  env.AdvanceTo(due + 1);
  env.AdvanceTo(due + 2);
  std::vector<Message> got = env.Delivered();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].body, "a");
  EXPECT_EQ(got[0].store_ms, due);
  EXPECT_EQ(got[1].body, "b");
  EXPECT_EQ(got[1].store_ms, due + 2);

  std::vector<Message> parked = Parked(env);
  ASSERT_EQ(parked.size(), 2u);
  const Message* bad = ParkedById(parked, "bad");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->body, "bad");
  EXPECT_EQ(Prop(*bad, kPoisonTopicProp), "%RETRY%sp ace");
  EXPECT_EQ(Prop(*bad, kPoisonSource), "timer");
  EXPECT_NE(Prop(*bad, kPoisonReason).find("invalid topic name '%RETRY%sp ace'"),
            std::string::npos)
      << Prop(*bad, kPoisonReason);
  EXPECT_NE(Prop(*bad, kTimerSourceOffset), "<absent>");
  EXPECT_EQ(bad->store_ms, due + 1);
  const Message* noqid = ParkedById(parked, "noqid");
  ASSERT_NE(noqid, nullptr);
  EXPECT_EQ(noqid->body, "noqid");
  EXPECT_EQ(Prop(*noqid, kPoisonTopicProp), "t");
  EXPECT_EQ(Prop(*noqid, kPoisonQueueId), "zero");
  EXPECT_NE(Prop(*noqid, kPoisonReason).find("not a deliverable timer message"),
            std::string::npos);
  EXPECT_EQ(env.ts().metrics().poison_parked.Value(), 2);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 1);  // c

  env.AdvanceTo(due + 5 * P());
  env.CheckHistory({{"a", due}, {"b", due + 2}, {"c", due + 5 * P()}});
  EXPECT_EQ(env.Delivered().back().store_ms, due + 5 * P());
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);

  // kill -9 after the moves (the last checkpoint is from before them): recovery walks the slots
  // again and must count the parked copies as moved (TIMER_SRC_OFFSET), not park them twice.
  env.Ack();
  env.Crash();
  env.AdvanceTo(due + 10 * P());
  EXPECT_EQ(Parked(env).size(), 2u);
  env.CheckHistory({{"a", due}, {"b", due + 2}, {"c", due + 5 * P()}});
  EXPECT_EQ(env.ts().metrics().poison_parked.Value(), 0);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

TEST_P(TimerPoisonTest, TopicDeletedWhilePendingIsParkedNotWedged) {
  std::set<std::string> deleted;
  TimerEnv env(P());
  env.topts().check_destination = [&deleted](const std::string& topic) {
    return deleted.contains(topic) ? absl::NotFoundError("topic '" + topic + "' does not exist")
                                   : absl::OkStatus();
  };
  env.Open();
  const int64_t due = (env.clock().NowMs() / P() + 2) * P() + 3;
  env.Send("g1", due, "gone");
  env.Send("a", due);
  env.Send("g2", due + 1, "gone");
  env.Send("b", due + 3 * P());
  env.Ack();
  deleted.insert("gone");  // deleted while its messages wait

  env.AdvanceTo(due + 1);
  EXPECT_TRUE(env.Delivered("gone").empty());
  std::vector<Message> parked = Parked(env);
  ASSERT_EQ(parked.size(), 2u);
  for (const Message& m : parked) {
    EXPECT_EQ(Prop(m, kPoisonTopicProp), "gone");
    EXPECT_EQ(Prop(m, kPoisonReason), "NOT_FOUND: topic 'gone' does not exist");
  }
  EXPECT_EQ(env.ts().metrics().poison_parked.Value(), 2);
  env.AdvanceTo(due + 3 * P());
  env.CheckHistory({{"a", due}, {"b", due + 3 * P()}});
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

TEST_P(TimerPoisonTest, CopyTheStoreRefusesIsParkedWithoutFailingItsBatch) {
  TimerEnv env(P());
  env.Open();
  const int64_t due = (env.clock().NowMs() / P() + 2) * P() + 5;
  env.Send("a", due);
  Message big;
  big.topic = "t";
  big.body.assign(3000, 'x');
  big.properties[prop::kMessageId] = "big";
  ASSERT_TRUE(env.ts().Schedule(std::move(big), due).ok());
  env.Send("b", due);
  env.Ack();
  // The operator lowers the body limit while "big" waits: its copy is refused at delivery.
  env.mopts().commitlog.max_message_size = 1000;
  env.CleanRestart();

  env.AdvanceTo(due);
  env.CheckHistory({{"a", due}, {"b", due}});
  std::vector<Message> parked = Parked(env);
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(Prop(parked[0], prop::kMessageId), "big");
  EXPECT_TRUE(parked[0].body.empty());  // the parked record is refused with its body too
  EXPECT_NE(Prop(parked[0], kPoisonReason).find("refused by the message store"),
            std::string::npos);
  EXPECT_NE(Prop(parked[0], kPoisonReason).find("body dropped"), std::string::npos);
  EXPECT_EQ(env.ts().metrics().poison_parked.Value(), 1);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

TEST_P(TimerPoisonTest, ScheduleRefusesADestinationTheNameRuleRefuses) {
  TimerEnv env(P());
  env.Open();
  Message m;
  m.topic = "%RETRY%sp ace";
  m.body = "x";
  auto r = env.ts().Schedule(std::move(m), env.clock().NowMs() + 1000);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env.ms().MaxQueueOffset(kTimerTopic, 0).value(), 0);
}

TEST_P(TimerPoisonTest, RecordThatNoLongerDecodesIsParkedAsAStub) {
  TimerEnv env(P());
  env.Open();
  const int64_t due = (env.clock().NowMs() / P() + 2) * P() + 9;
  env.Send("a", due);
  Message doomed;
  doomed.topic = "t";
  doomed.body = "DOOMED-BODY-0123456789";
  doomed.properties[prop::kMessageId] = "doomed";
  auto scheduled = env.ts().Schedule(std::move(doomed), due);
  ASSERT_TRUE(scheduled.ok()) << scheduled.status();
  env.Send("b", due);
  env.Ack();
  env.Run();  // enqueued into the TimerLog
  // A bit flips in the stored record's body (bad disk): its CRC no longer matches.
  const std::string segment = env.mopts().dir + "/commitlog/00000000000000000000";
  std::fstream f(segment, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find("DOOMED-BODY");
  ASSERT_NE(at, std::string::npos);
  f.seekp(static_cast<std::streamoff>(at));
  f.put('d');
  f.close();

  env.AdvanceTo(due);
  env.CheckHistory({{"a", due}, {"b", due}});
  std::vector<Message> parked = Parked(env);
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_TRUE(parked[0].body.empty());
  EXPECT_EQ(Prop(parked[0], kTimerSourceOffset),
            std::to_string(scheduled->put.physical_offset.value()));
  EXPECT_EQ(Prop(parked[0], prop::kDeliverMs), std::to_string(due));
  EXPECT_NE(Prop(parked[0], kPoisonReason).find("the record does not decode"), std::string::npos)
      << Prop(parked[0], kPoisonReason);
  EXPECT_EQ(env.ts().metrics().poison_parked.Value(), 1);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

TEST_P(TimerPoisonTest, DiskFullIsNotPoisonAndIsRetriedWithBackoff) {
  TimerEnv env(P());
  env.Open();
  const int64_t due = (env.clock().NowMs() / P() + 2) * P() + 1;
  env.Send("a", due);
  env.Ack();
  env.Run();
  env.fs().SetNoSpace(true);
  env.clock().SetMs(due);
  absl::Status first = env.ts().RunUntilIdle();
  EXPECT_FALSE(first.ok());  // the put fails
  // Backing off: the same instant (and 9 ms later) tries nothing, so no error line either.
  EXPECT_TRUE(env.ts().RunUntilIdle().ok());
  env.clock().SetMs(due + 9);
  EXPECT_TRUE(env.ts().RunUntilIdle().ok());
  env.clock().SetMs(due + 10);
  absl::Status second = env.ts().RunUntilIdle();
  EXPECT_FALSE(second.ok()) << first;  // retried after 10 ms, next wait 20 ms
  env.clock().SetMs(due + 29);
  absl::Status later = env.ts().RunUntilIdle();
  EXPECT_TRUE(later.ok()) << later;
  // Never taken for poison; kept and delivered once the store works again.
  EXPECT_TRUE(Parked(env).empty());
  EXPECT_EQ(env.ts().metrics().poison_parked.Value(), 0);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 1);
  env.fs().ClearFaults();
  env.Crash();  // a failed CommitLog append recovers at restart (diskfull work may lift this)
  env.AdvanceTo(due + 2000);
  env.CheckHistory({{"a", due}});
  EXPECT_TRUE(Parked(env).empty());
}

INSTANTIATE_TEST_SUITE_P(Precision, TimerPoisonTest, ::testing::Values(1000, 100),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace tokimq::testing
