// QueueOfKey (broker/src/queue_of_key.h): FNV-1a 64 of the key modulo the queue count.
#include "queue_of_key.h"

#include <gtest/gtest.h>

namespace tokimq::broker {
namespace {

TEST(QueueOfKey, IsFnv1a64OfTheKeyModuloTheQueueCount) {
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (offset basis 0xcbf29ce484222325): 8 queues -> 4.
  // (The broker once started from 1469598103934665603, a digit short, which put "a" in 6.)
  EXPECT_EQ(QueueOfKey("a", 8), 4);
  EXPECT_EQ(QueueOfKey("a", 4), 0);
  EXPECT_EQ(QueueOfKey("order-1", 8), 5);
  EXPECT_EQ(QueueOfKey("customer-7", 8), 1);
  EXPECT_EQ(QueueOfKey("key-1", 8), 6);
  EXPECT_EQ(QueueOfKey("key-2", 8), 3);
}

TEST(QueueOfKey, OneQueueTakesEveryKey) {
  EXPECT_EQ(QueueOfKey("a", 1), 0);
  EXPECT_EQ(QueueOfKey("", 1), 0);
}

}  // namespace
}  // namespace tokimq::broker
