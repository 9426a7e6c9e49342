// HandOffBatch: tasks added while a batch is open reach each target in one post, in the order
// they were added; without a batch nothing is taken; nested batches and flushes.
#include "common/hand_off_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tokimq {
namespace {

struct FakeTarget {
  std::vector<std::vector<HandOffBatch::Task>> posts;
  static void Post(void* t, std::vector<HandOffBatch::Task> tasks) {
    static_cast<FakeTarget*>(t)->posts.push_back(std::move(tasks));
  }
};

HandOffBatch::Task Record(std::vector<std::string>* log, std::string what) {
  return [log, what = std::move(what)] { log->push_back(what); };
}

TEST(HandOffBatchTest, WithoutABatchAddTakesNothing) {
  FakeTarget t;
  std::vector<std::string> log;
  HandOffBatch::Task task = Record(&log, "x");
  EXPECT_FALSE(HandOffBatch::Add(&t, &FakeTarget::Post, task));
  ASSERT_TRUE(task);  // still the caller's to post
  std::move(task)();
  EXPECT_EQ(log, std::vector<std::string>{"x"});
  EXPECT_TRUE(t.posts.empty());
}

TEST(HandOffBatchTest, TasksReachEachTargetInOnePostInTheOrderAdded) {
  FakeTarget a, b;
  std::vector<std::string> log_a, log_b;
  size_t posts = 0, tasks = 0;
  {
    HandOffBatch batch;
    for (int i = 0; i < 5; ++i) {
      HandOffBatch::Task ta = Record(&log_a, "a" + std::to_string(i));
      HandOffBatch::Task tb = Record(&log_b, "b" + std::to_string(i));
      EXPECT_TRUE(HandOffBatch::Add(&a, &FakeTarget::Post, ta));
      EXPECT_TRUE(HandOffBatch::Add(&b, &FakeTarget::Post, tb));
    }
    EXPECT_TRUE(a.posts.empty());  // nothing handed over while the batch is open
    batch.Flush();
    posts = batch.posts();
    tasks = batch.tasks();
  }
  EXPECT_EQ(posts, 2u);
  EXPECT_EQ(tasks, 10u);
  ASSERT_EQ(a.posts.size(), 1u);
  ASSERT_EQ(b.posts.size(), 1u);
  for (auto& t : a.posts[0]) std::move(t)();
  for (auto& t : b.posts[0]) std::move(t)();
  EXPECT_EQ(log_a, (std::vector<std::string>{"a0", "a1", "a2", "a3", "a4"}));
  EXPECT_EQ(log_b, (std::vector<std::string>{"b0", "b1", "b2", "b3", "b4"}));
}

TEST(HandOffBatchTest, ClosingTheBatchHandsOverWhatItHolds) {
  FakeTarget a;
  std::vector<std::string> log;
  {
    HandOffBatch batch;
    HandOffBatch::Task t = Record(&log, "x");
    ASSERT_TRUE(HandOffBatch::Add(&a, &FakeTarget::Post, t));
  }
  ASSERT_EQ(a.posts.size(), 1u);
  EXPECT_EQ(a.posts[0].size(), 1u);
  // Closed: the thread has no batch any more.
  HandOffBatch::Task t = Record(&log, "y");
  EXPECT_FALSE(HandOffBatch::Add(&a, &FakeTarget::Post, t));
}

TEST(HandOffBatchTest, InnerBatchCollectsAndFlushesOnItsOwnThenTheOuterGoesOn) {
  FakeTarget a;
  std::vector<std::string> log;
  {
    HandOffBatch outer;
    HandOffBatch::Task t1 = Record(&log, "outer1");
    ASSERT_TRUE(HandOffBatch::Add(&a, &FakeTarget::Post, t1));
    {
      HandOffBatch inner;
      HandOffBatch::Task t2 = Record(&log, "inner");
      ASSERT_TRUE(HandOffBatch::Add(&a, &FakeTarget::Post, t2));
    }
    ASSERT_EQ(a.posts.size(), 1u);  // the inner one's
    EXPECT_EQ(a.posts[0].size(), 1u);
    HandOffBatch::Task t3 = Record(&log, "outer2");
    ASSERT_TRUE(HandOffBatch::Add(&a, &FakeTarget::Post, t3));
  }
  ASSERT_EQ(a.posts.size(), 2u);
  ASSERT_EQ(a.posts[1].size(), 2u);
  for (auto& p : a.posts) {
    for (auto& t : p) std::move(t)();
  }
  EXPECT_EQ(log, (std::vector<std::string>{"inner", "outer1", "outer2"}));
}

}  // namespace
}  // namespace tokimq
