// TimerStore::ScheduleBatch: same rewrite, results and recall handles as Schedule per message,
// one contiguous CommitLog write, all-or-nothing on validation errors, crash and fault cases.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "timer_env.h"
#include "timerstore/recall_handle.h"

namespace tokimq::testing {
namespace {

ScheduleItem Item(const std::string& id, int64_t deliver_ms, const std::string& topic = "t") {
  ScheduleItem it;
  it.msg.topic = topic;
  it.msg.queue_id = 0;
  it.msg.body = id;
  it.msg.properties[prop::kMessageId] = id;
  it.deliver_ms = deliver_ms;
  return it;
}

class TimerScheduleBatchTest : public ::testing::Test {
 protected:
  void SetUp() override { env_.Open(); }
  // Schedules `items` in one batch, remembering the ids for CheckHistory on success.
  absl::StatusOr<std::vector<ScheduleResult>> Batch(std::vector<ScheduleItem> items) {
    std::vector<std::pair<std::string, int64_t>> ids;
    for (const ScheduleItem& it : items) ids.emplace_back(it.msg.body, it.deliver_ms);
    auto r = env_.ts().ScheduleBatch(std::move(items));
    if (r.ok()) {
      for (const auto& [id, ms] : ids) env_.sent()[id] = ms;
    }
    return r;
  }
  TimerEnv env_{100};
};

TEST_F(TimerScheduleBatchTest, EachItemDeliveredAtItsMillisecondExactlyOnce) {
  const int64_t now = env_.clock().NowMs();
  std::vector<ScheduleItem> items;
  for (int i = 0; i < 50; ++i) items.push_back(Item("m" + std::to_string(i), now + 1 + i * 37));
  auto r = Batch(std::move(items));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 50u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_FALSE((*r)[i].delivered_now);
    EXPECT_EQ((*r)[i].put.queue_offset.value(), i);  // timer topic, in item order
  }
  env_.Run();
  EXPECT_EQ(env_.ts().metrics().pending.Value(), 50);
  for (int i = 0; i < 50; ++i) {
    const int64_t t = now + 1 + i * 37;
    env_.AdvanceTo(t - 1);
    EXPECT_EQ(env_.Delivered().size(), static_cast<size_t>(i));
    env_.AdvanceTo(t);
    ASSERT_EQ(env_.Delivered().size(), static_cast<size_t>(i + 1));
    EXPECT_EQ(env_.Delivered().back().body, "m" + std::to_string(i));
    EXPECT_EQ(env_.Delivered().back().store_ms, t);
  }
  env_.CheckHistory(env_.sent());
  EXPECT_EQ(env_.ts().metrics().delivered.Value(), 50);
  EXPECT_EQ(env_.ts().metrics().pending.Value(), 0);
}

TEST_F(TimerScheduleBatchTest, OneContiguousWriteInItemOrder) {
  const int64_t now = env_.clock().NowMs();
  const int64_t start = env_.ms().commit_log()->MaxOffset().value();
  auto r = Batch({Item("a", now + 500), Item("b", now), Item("c", now + 900, "u"),
                  Item("d", now - 5, "u")});
  ASSERT_TRUE(r.ok()) << r.status();
  int64_t pos = start;
  for (const ScheduleResult& s : *r) {
    EXPECT_EQ(s.put.physical_offset.value(), pos);
    pos += s.put.size;
  }
  EXPECT_EQ(env_.ms().commit_log()->MaxOffset().value(), pos);
}

TEST_F(TimerScheduleBatchTest, DueNowItemsGoToTheirRealTopicLikeSchedule) {
  const int64_t now = env_.clock().NowMs();
  auto r = Batch({Item("late", now - 1000), Item("wait", now + 200), Item("now", now, "u")});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)[0].delivered_now);
  EXPECT_FALSE((*r)[1].delivered_now);
  EXPECT_TRUE((*r)[2].delivered_now);
  EXPECT_EQ((*r)[0].put.queue_offset.value(), 0);  // topic t
  EXPECT_EQ((*r)[1].put.queue_offset.value(), 0);  // timer topic
  EXPECT_EQ((*r)[2].put.queue_offset.value(), 0);  // topic u
  EXPECT_EQ(env_.ts().metrics().delivered.Value(), 2);
  // The stored records are what Schedule writes: deliver time on both, real destination on the
  // timer one.
  auto late = env_.ms().Read((*r)[0].put.physical_offset);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->topic, "t");
  EXPECT_EQ(late->properties.at(prop::kDeliverMs), std::to_string(now - 1000));
  auto wait = env_.ms().Read((*r)[1].put.physical_offset);
  ASSERT_TRUE(wait.ok()) << wait.status();
  EXPECT_EQ(wait->topic, kTimerTopic);
  EXPECT_EQ(wait->properties.at(prop::kRealTopic), "t");
  EXPECT_EQ(wait->properties.at(prop::kRealQueueId), "0");
  EXPECT_EQ(wait->properties.at(prop::kDeliverMs), std::to_string(now + 200));
  // Same bytes as Schedule would have produced for that message (apart from offsets).
  auto single = env_.ts().Schedule(Item("wait", now + 200).msg, now + 200);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->put.size, (*r)[1].put.size);
  env_.sent().erase("wait");  // delivered twice on purpose below; check the others only
  env_.AdvanceTo(now + 200);
  EXPECT_EQ(env_.Delivered("t").size(), 3u);  // late + wait (batch) + wait (single)
  EXPECT_EQ(env_.Delivered("u").size(), 1u);
}

TEST_F(TimerScheduleBatchTest, RecallHandlesWorkPerItem) {
  const int64_t now = env_.clock().NowMs();
  auto r = Batch({Item("keep", now + 300), Item("drop", now + 300), Item("now", now)});
  ASSERT_TRUE(r.ok()) << r.status();
  auto h = RecallHandle::Decode((*r)[1].recall_handle);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->physical_offset, (*r)[1].put.physical_offset);
  EXPECT_EQ(h->deliver_ms, now + 300);
  EXPECT_TRUE(env_.ts().Recall((*r)[1].recall_handle).ok());
  EXPECT_EQ(env_.ts().Recall((*r)[1].recall_handle).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(env_.ts().Recall((*r)[2].recall_handle).code(),
            absl::StatusCode::kFailedPrecondition);  // already delivered
  env_.AdvanceTo(now + 1000);
  env_.sent().erase("drop");
  env_.CheckHistory(env_.sent());
}

TEST_F(TimerScheduleBatchTest, EmptyBatchIsOkAndWritesNothing) {
  const PhysicalOffset end = env_.ms().commit_log()->MaxOffset();
  auto r = env_.ts().ScheduleBatch({});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(env_.ms().commit_log()->MaxOffset(), end);
}

TEST_F(TimerScheduleBatchTest, BadDestinationFailsWholeBatchWithNothingStored) {
  const int64_t now = env_.clock().NowMs();
  const PhysicalOffset end = env_.ms().commit_log()->MaxOffset();
  auto r = Batch({Item("a", now + 100), Item("b", now, "bad topic"), Item("c", now + 100)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env_.ms().commit_log()->MaxOffset(), end);
  EXPECT_EQ(env_.ms().MaxQueueOffset(kTimerTopic, 0).value(), 0);
  EXPECT_EQ(env_.ts().metrics().delivered.Value(), 0);
}

TEST_F(TimerScheduleBatchTest, OversizeMessageFailsWholeBatchWithNothingStored) {
  const int64_t now = env_.clock().NowMs();
  const PhysicalOffset end = env_.ms().commit_log()->MaxOffset();
  ScheduleItem big = Item("big", now + 100);
  big.msg.body.assign(2u << 20, 'x');  // larger than the 1 MiB test segment
  std::vector<ScheduleItem> items;
  items.push_back(Item("a", now + 100));
  items.push_back(std::move(big));
  auto r = Batch(std::move(items));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env_.ms().commit_log()->MaxOffset(), end);
  EXPECT_EQ(env_.ms().MaxQueueOffset(kTimerTopic, 0).value(), 0);
}

TEST_F(TimerScheduleBatchTest, DiskFullFailsWholeBatchAndStoreCarriesOnAfterReopen) {
  const int64_t now = env_.clock().NowMs();
  env_.fs().SetNoSpace(true);
  auto r = Batch({Item("a", now + 100), Item("b", now + 200)});
  EXPECT_FALSE(r.ok());
  env_.fs().ClearFaults();
  env_.Crash();  // the log failed; a restart recovers it
  EXPECT_EQ(env_.ms().MaxQueueOffset(kTimerTopic, 0).value(), 0);
  auto again = Batch({Item("c", now + 300)});
  ASSERT_TRUE(again.ok()) << again.status();
  env_.AdvanceTo(now + 1000);
  env_.CheckHistory({{"c", now + 300}});
}

TEST_F(TimerScheduleBatchTest, AcknowledgedBatchSurvivesCrashWithoutDuplicates) {
  const int64_t now = env_.clock().NowMs();
  std::vector<ScheduleItem> items;
  for (int i = 0; i < 200; ++i) {
    items.push_back(Item("m" + std::to_string(i), i % 10 == 0 ? now : now + 100 + i * 13));
  }
  ASSERT_TRUE(Batch(std::move(items)).ok());
  env_.Ack();
  env_.Run();
  env_.AdvanceTo(now + 1000);  // part delivered
  env_.Crash();
  env_.AdvanceTo(now + 5000);
  env_.CheckHistory(env_.sent());
}

// Nice values of this process's threads (/proc/self/task/*/stat, field 19).
std::multiset<int> ThreadNiceValues() {
  std::multiset<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Fields after the ")" that closes the thread name: state is field 3, nice field 19.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i < 19 && rest >> field; ++i) {
    }
    int nice = 0;
    if (rest >> nice) out.insert(nice);
  }
  return out;
}

TEST(TimerServiceNiceTest, EnqueueAndDequeueThreadsRunAtTheConfiguredNiceValue) {
  TimerEnv env(1000);
  env.topts().service_nice = 7;  // lowering a thread's priority needs no privilege
  env.Open();
  const size_t before = ThreadNiceValues().count(7);
  ASSERT_TRUE(env.ts().Start().ok());  // returns once its threads have their priority
  // Enqueue, dequeue get, dequeue read, dequeue put, and the checkpointer (it takes the store
  // lock: preempted while holding it, it would hold up the dequeue threads).
  EXPECT_EQ(ThreadNiceValues().count(7), before + 5);
  ASSERT_TRUE(env.ts().Stop().ok());
}

// A TimerStore that only implements Schedule: the default ScheduleBatch calls it per item.
class ScheduleOnly final : public TimerStore {
 public:
  explicit ScheduleOnly(TimerStore* inner) : inner_(inner) {}
  absl::StatusOr<ScheduleResult> Schedule(Message msg, int64_t deliver_ms) override {
    ++calls;
    return inner_->Schedule(std::move(msg), deliver_ms);
  }
  absl::Status Recall(std::string_view h) override { return inner_->Recall(h); }
  absl::Status RunUntilIdle() override { return inner_->RunUntilIdle(); }
  absl::Status Start() override { return inner_->Start(); }
  absl::Status Stop() override { return inner_->Stop(); }
  absl::Status Checkpoint() override { return inner_->Checkpoint(); }
  TimerMetrics& metrics() override { return inner_->metrics(); }
  int calls = 0;

 private:
  TimerStore* inner_;
};

TEST_F(TimerScheduleBatchTest, DefaultImplementationSchedulesEachItemAndStopsAtFirstError) {
  const int64_t now = env_.clock().NowMs();
  ScheduleOnly only(&env_.ts());
  std::vector<ScheduleItem> items;
  items.push_back(Item("a", now + 100));
  items.push_back(Item("b", now, "bad topic"));  // due now: written to its (bad) topic
  items.push_back(Item("c", now + 100));
  auto r = only.ScheduleBatch(std::move(items));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(only.calls, 2);
  EXPECT_EQ(env_.ms().MaxQueueOffset(kTimerTopic, 0).value(), 1);  // "a" stays stored
  auto ok = only.ScheduleBatch({Item("d", now + 100), Item("e", now)});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FALSE((*ok)[0].delivered_now);
  EXPECT_TRUE((*ok)[1].delivered_now);
}

}  // namespace
}  // namespace tokimq::testing
