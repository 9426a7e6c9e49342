// FIFO message-group index (broker/src/consumer/fifo_group_index.h), through the Progress
// that keeps it in step with its lease table.
#include "consumer/fifo_group_index.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "consumer/queue_progress.h"

namespace tokimq::consumer {
namespace {

LeaseRecord Leased(const std::string& group) {
  LeaseRecord l;
  l.msg_group = group;
  l.invisible_until_ms = 1'000;
  return l;
}

LeaseRecord Parked(const std::string& group, int64_t until_ms = 0) {
  LeaseRecord l = Leased(group);
  l.parked = true;
  l.epoch = 0;
  l.invisible_until_ms = until_ms;
  return l;
}

Progress Fifo() { return Progress(QueueKey{"g", "t", "t", 0}, /*is_fifo=*/true); }

TEST(FifoGroupIndex, ALeasedHeadBlocksItsGroupAndItsParkedFollowerIsNotReady) {
  Progress p = Fifo();
  p.SetLease(10, Leased("a"));
  p.SetLease(11, Parked("a"));
  EXPECT_TRUE(p.fifo_index.Blocks("a"));
  EXPECT_FALSE(p.fifo_index.Blocks("b"));
  EXPECT_EQ(p.fifo_index.parked(), 1u);
  EXPECT_TRUE(p.fifo_index.ready().empty());
}

TEST(FifoGroupIndex, AckingTheHeadMakesTheParkedFollowerReady) {
  Progress p = Fifo();
  p.SetLease(10, Leased("a"));
  p.SetLease(11, Parked("a"));
  p.SetLease(12, Parked("a"));
  p.EraseLease(10);
  EXPECT_EQ(p.fifo_index.ready(), (std::set<int64_t>{11}));
  EXPECT_EQ(p.fifo_index.parked(), 2u);
  p.EraseLease(11);
  EXPECT_EQ(p.fifo_index.ready(), (std::set<int64_t>{12}));
  p.EraseLease(12);
  EXPECT_FALSE(p.fifo_index.Blocks("a"));
  EXPECT_EQ(p.fifo_index.parked(), 0u);
}

TEST(FifoGroupIndex, ParkedUngroupedEntriesAreReadyAtOnce) {
  Progress p = Fifo();
  p.SetLease(5, Parked("", 2'000));
  p.SetLease(7, Parked(""));
  EXPECT_EQ(p.fifo_index.ready(), (std::set<int64_t>{5, 7}));
  EXPECT_FALSE(p.fifo_index.Blocks(""));
}

TEST(FifoGroupIndex, AnEarlierEntryLinkedLaterBecomesTheHead) {
  // Recovery links lease blocks in key order, which need not be offset order across blocks.
  Progress p = Fifo();
  p.SetLease(20, Parked("a"));
  EXPECT_EQ(p.fifo_index.ready(), (std::set<int64_t>{20}));
  p.SetLease(15, Leased("a"));
  EXPECT_TRUE(p.fifo_index.ready().empty());
}

TEST(FifoGroupIndex, ReplacingALeaseWithAParkedRedeliveryKeepsTheGroupBlockedAndReady) {
  Progress p = Fifo();
  p.SetLease(10, Leased("a"));
  p.SetLease(10, Parked("a", 5'000));  // expired: parked for its redelivery time
  EXPECT_TRUE(p.fifo_index.Blocks("a"));
  EXPECT_EQ(p.fifo_index.ready(), (std::set<int64_t>{10}));
  EXPECT_EQ(p.fifo_index.parked(), 1u);
}

TEST(FifoGroupIndex, SwitchingFifoOffIsRefusedWhileEntriesAreParked) {
  Progress p = Fifo();
  p.SetLease(10, Parked("a"));
  p.SetFifo(false);
  EXPECT_TRUE(p.fifo);
  p.EraseLease(10);
  p.SetFifo(false);
  EXPECT_FALSE(p.fifo);
  p.leases[3] = Leased("b");
  p.SetFifo(true);  // rebuilt from the lease table
  EXPECT_TRUE(p.fifo_index.Blocks("b"));
}

}  // namespace
}  // namespace tokimq::consumer
