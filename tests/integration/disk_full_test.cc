// Harness 9: the real broker on a small tmpfs through fill, hold and free.
// Producers are refused (RESOURCE_EXHAUSTED) above the disk watermark while delayed messages
// already accepted are still delivered on time from the reserve; sends are accepted again once
// space is freed, with no restart; and with the watermark off, a disk that really fills refuses
// sends without failing the broker for good, stores nothing of a refused batch, resumes by
// itself, and SIGTERM exits 0. Every test ends with: the messages stored in the topic are
// exactly the acknowledged sends (nothing lost, nothing unacknowledged), also after a restart.
//
// Needs mount(2) (root or CAP_SYS_ADMIN); skipped with a message where it is not permitted.
// Filler files are allocated with fallocate(2), so filling takes no time.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "support/await.h"
#include "support/fill_disk.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::AdminClient;
using client::OutgoingMessage;
using client::Producer;
using client::ReceivedMessage;
using client::ReceiveOptions;
using client::SimpleConsumer;
using namespace std::chrono_literals;
using testing::AwaitTrue;
using testing::BrokerProcess;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMiB = 1 << 20;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mnt_ = dir_.Join("mnt");  // the data dir; its log and port file sit beside it, off the tmpfs
    ASSERT_EQ(::mkdir(mnt_.c_str(), 0755), 0) << std::strerror(errno);
    if (::mount("tokimq-diskfull", mnt_.c_str(), "tmpfs", 0, "size=64m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs at " << mnt_ << " (" << std::strerror(errno)
                   << "): the disk-full harness needs root or CAP_SYS_ADMIN";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (HasFailure()) {  // the log goes with the temp dir: show its end
      std::ifstream in(mnt_ + ".log");
      std::vector<std::string> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      for (size_t i = lines.size() > 40 ? lines.size() - 40 : 0; i < lines.size(); ++i) {
        std::printf("broker log: %s\n", lines[i].c_str());
      }
    }
    if (broker_) broker_->Kill();
    broker_.reset();
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
  }

  void StartBroker(std::vector<std::string> disk_args) {
    std::vector<std::string> args = {"--grpc-port", "0", "--disk-check-interval", "100ms"};
    args.insert(args.end(), disk_args.begin(), disk_args.end());
    broker_ = std::make_unique<BrokerProcess>(mnt_, args);
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << mnt_ << ".log";
    Connect();
  }
  void Connect() {
    admin_ = std::make_unique<AdminClient>(broker_->Options());
    producer_ = std::make_unique<Producer>(broker_->Options());
    consumer_ = std::make_unique<SimpleConsumer>(broker_->Options(), "g");
  }
  void CreateTopic() {
    proto::TopicConfig t;
    t.set_name("t");
    t.set_type(proto::DELAY);
    t.set_queues(2);
    auto created = admin_->CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  // Grows the filler file until only `leave` bytes are free (0: until the disk is full).
  void Fill(uint64_t leave) {
    absl::Status s = testing::FillDisk(mnt_, leave);
    ASSERT_TRUE(s.ok()) << s;
  }
  void FreeFiller() { ASSERT_EQ(::unlink((mnt_ + "/filler").c_str()), 0); }

  // Sends `n` messages of `body_bytes` in one request; on success records them as acknowledged.
  absl::Status SendBatch(const std::string& prefix, int n, size_t body_bytes,
                         int64_t delay_ms = 0) {
    std::vector<OutgoingMessage> msgs;
    for (int i = 0; i < n; ++i) {
      OutgoingMessage m;
      m.topic = "t";
      m.key = prefix + std::to_string(i);
      m.body = std::string(body_bytes, 'x');
      if (delay_ms > 0) m.delay_ms = delay_ms + i % 7 * 100;
      msgs.push_back(std::move(m));
    }
    auto r = producer_->SendBatch(msgs);
    if (!r.ok()) return r.status();
    for (const auto& receipt : *r) {
      acked_[receipt.message_id] = receipt.delayed ? receipt.deliver_at_ms : 0;
    }
    return absl::OkStatus();
  }
  // Sends batches of 20 ("after", 1000-byte bodies) every 20 ms until one is accepted (space came
  // back and the broker noticed) or `timeout` passed.
  ::testing::AssertionResult AwaitAcceptedSend(std::chrono::milliseconds timeout) {
    absl::Status last;
    ::testing::AssertionResult accepted = AwaitTrue(
        [&] {
          last = SendBatch("after", 20, 1000);
          return last.ok();
        },
        timeout, "an accepted send", 20ms);
    if (!accepted) accepted << "; last refusal: " << last;
    return accepted;
  }
  // Receives and acks until `want` distinct acknowledged sends were seen or `ms` passed; records
  // each message's lateness (receive time - deliver time, ms) for delayed ones.
  void ReceiveUntil(size_t want, int64_t ms) {
    auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (received_.size() < want && Clock::now() < deadline) {
      ReceiveOptions o;
      o.max_messages = 64;
      o.long_poll_ms = 200;
      auto got = consumer_->Receive("t", o);
      ASSERT_TRUE(got.ok()) << got.status();
      const int64_t now = WallMs();
      for (const ReceivedMessage& m : *got) {
        if (!received_.insert(m.message_id).second) ++duplicates_;
        auto it = acked_.find(m.message_id);
        if (it != acked_.end() && it->second > 0) {
          max_lateness_ms_ = std::max(max_lateness_ms_, now - it->second);
        }
        ASSERT_TRUE(consumer_->Ack(m.receipt_handle).ok());
      }
    }
  }
  // What the topic stores (a fresh group reads it all) is exactly the acknowledged sends.
  void ExpectStoredIsAcknowledged() {
    // A group of its own each time (its leases would hide the messages from a second look).
    SimpleConsumer audit(broker_->Options(), "audit" + std::to_string(++audits_));
    std::set<std::string> stored;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (stored.size() < acked_.size() && Clock::now() < deadline) {
      ReceiveOptions o;
      o.max_messages = 256;
      o.long_poll_ms = 200;
      auto got = audit.Receive("t", o);
      ASSERT_TRUE(got.ok()) << got.status();
      for (const ReceivedMessage& m : *got) stored.insert(m.message_id);
    }
    ReceiveOptions o;
    o.long_poll_ms = 300;
    auto more = audit.Receive("t", o);  // nothing beyond the acknowledged ones
    ASSERT_TRUE(more.ok());
    for (const ReceivedMessage& m : *more) stored.insert(m.message_id);
    size_t lost = 0, unacked = 0;
    for (const auto& [id, at] : acked_) lost += stored.count(id) == 0 ? 1 : 0;
    for (const std::string& id : stored) unacked += acked_.count(id) == 0 ? 1 : 0;
    EXPECT_EQ(lost, 0u) << "acknowledged sends missing of " << acked_.size();
    EXPECT_EQ(unacked, 0u) << "messages stored that were never acknowledged";
    auto st = admin_->Stats();
    ASSERT_TRUE(st.ok());
    for (const auto& t : st->topics()) {
      if (t.name() == "t") {
        EXPECT_EQ(t.depth(), static_cast<int64_t>(acked_.size()));
      }
    }
  }
  proto::StatsResponse Stats() {
    auto st = admin_->Stats();
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? *st : proto::StatsResponse{};
  }
  // Lines of the broker log that contain `needle`.
  int LogLines(const std::string& needle) {
    std::ifstream in(mnt_ + ".log");
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
  }

  tokimq::testing::TempDir dir_;
  std::string mnt_;
  bool mounted_ = false;
  std::unique_ptr<BrokerProcess> broker_;
  std::unique_ptr<AdminClient> admin_;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<SimpleConsumer> consumer_;
  std::map<std::string, int64_t> acked_;  // message id -> deliver at (0: immediate)
  std::set<std::string> received_;
  int duplicates_ = 0;
  int audits_ = 0;
  int64_t max_lateness_ms_ = 0;
};

TEST_F(DiskFullTest, AboveTheWatermarkProducersAreRefusedWhileDelayedMessagesAreDelivered) {
  // Producers refused below 16 MiB free; the watermark by ratio is off (a 64 MiB disk).
  StartBroker({"--disk-min-free", std::to_string(16 * kMiB), "--disk-max-used-ratio", "1"});
  CreateTopic();
  ASSERT_TRUE(SendBatch("now", 200, 1000).ok());
  // Due 2-3.3 s from now: they come due while the disk is held above the watermark.
  for (int b = 0; b < 4; ++b) {
    ASSERT_TRUE(SendBatch("later" + std::to_string(b) + "-", 50, 1000, 2000 + b * 300).ok());
  }
  for (const auto& [id, at] : acked_) {
    if (at > 0) {
      ASSERT_GT(at, WallMs() + 1000) << "test too slow to hold before the releases";
    }
  }

  Fill(8 * kMiB);  // above the watermark, below the hard limit
  absl::Status refused;
  EXPECT_TRUE(AwaitTrue(
      [&] {
        refused = SendBatch("edge", 1, 100);
        return !refused.ok();
      },
      3s, "a refused send", 20ms));
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("disk usage above watermark"), std::string::npos) << refused;
  proto::StatsResponse st = Stats();
  EXPECT_EQ(st.disk_state(), proto::DISK_ABOVE_WATERMARK);
  EXPECT_GE(st.sends_refused(), 1);
  EXPECT_LT(st.disk_free_bytes(), 16 * kMiB);
  EXPECT_EQ(st.disk_watermark_free_bytes(), 16 * kMiB);

  // Hold: every send refused, every delayed message delivered on time from the reserve.
  int refused_sends = 0;
  std::thread sender([&] {
    Producer p(broker_->Options());
    for (int i = 0; i < 20; ++i) {
      OutgoingMessage m;
      m.topic = "t";
      m.body = "held";
      auto r = p.Send(m);
      if (r.ok()) {
        ADD_FAILURE() << "send accepted above the watermark";
      } else if (r.status().code() == absl::StatusCode::kResourceExhausted) {
        ++refused_sends;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  ReceiveUntil(acked_.size(), 10'000);
  sender.join();
  EXPECT_EQ(refused_sends, 20);
  EXPECT_EQ(received_.size(), acked_.size()) << "delivery stopped above the watermark";
  EXPECT_EQ(duplicates_, 0);
  EXPECT_LT(max_lateness_ms_, 1000) << "delayed messages released late above the watermark";
  std::printf(
      "[harness 9] above the watermark: %d of 20 sends refused, %zu messages received, "
      "max lateness (receive - deliver time) %lld ms\n",
      refused_sends, received_.size(), static_cast<long long>(max_lateness_ms_));
  EXPECT_EQ(Stats().timer().pending(), 0);

  FreeFiller();  // space returns: sends are admitted again, no restart
  ASSERT_TRUE(AwaitAcceptedSend(3s));
  ASSERT_TRUE(SendBatch("after-delayed", 20, 1000, 500).ok());
  EXPECT_EQ(Stats().disk_state(), proto::DISK_OK);
  ReceiveUntil(acked_.size(), 10'000);
  EXPECT_EQ(received_.size(), acked_.size());
  EXPECT_EQ(duplicates_, 0);

  EXPECT_EQ(LogLines("disk usage above watermark on"), 1);
  EXPECT_EQ(LogLines("below watermark again"), 1);
  ExpectStoredIsAcknowledged();
  ASSERT_EQ(broker_->Stop(), 0);
  ASSERT_TRUE(broker_->Start());
  Connect();
  ExpectStoredIsAcknowledged();
}

TEST_F(DiskFullTest, AFullDiskRefusesSendsStoresNothingOfThemAndResumesWhenFreed) {
  // Watermark off: the disk really fills, and the CommitLog meets ENOSPC.
  StartBroker({"--disk-min-free", "0", "--disk-max-used-ratio", "1"});
  CreateTopic();
  ASSERT_TRUE(SendBatch("now", 100, 1000).ok());
  ASSERT_TRUE(SendBatch("later", 50, 1000, 1500).ok());

  Fill(256 << 10);
  // A batch larger than the space left: part of it would fit.
  int refused = 0;
  for (int i = 0; i < 10; ++i) {
    absl::Status s = SendBatch("full" + std::to_string(i) + "-", 100, 4000);
    if (s.ok()) continue;  // fitted in what was left
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    ++refused;
  }
  EXPECT_GE(refused, 9);
  Fill(0);
  for (int i = 0; i < 5; ++i) {
    absl::Status s = SendBatch("fuller" + std::to_string(i) + "-", 10, 100);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  }
  proto::StatsResponse st = Stats();
  EXPECT_EQ(st.disk_state(), proto::DISK_FULL);
  EXPECT_GE(st.disk_no_space_errors(), 1);
  // "later" falls due meanwhile (its releases meet the full disk).
  int64_t later_due_ms = 0;
  for (const auto& [id, at] : acked_) later_due_ms = std::max(later_due_ms, at);
  ASSERT_TRUE(AwaitTrue([&] { return WallMs() >= later_due_ms + 500; }, 10s,
                        "the wall clock 500 ms past the last deliver time", 50ms));

  FreeFiller();  // writing resumes by itself, without a restart
  ASSERT_TRUE(AwaitAcceptedSend(5s));
  ReceiveUntil(acked_.size(), 10'000);
  EXPECT_EQ(received_.size(), acked_.size()) << "the timer did not resume after the disk full";
  EXPECT_EQ(duplicates_, 0);
  // Once per state change, not per request (per request would be ~6,000 lines/s).
  EXPECT_LE(LogLines("space"), 20);
  std::printf("[harness 9] disk full: %d of 10 large batches refused, %d log lines about space\n",
              refused, LogLines("space"));

  Fill(0);
  ASSERT_TRUE(!SendBatch("at-exit", 10, 100).ok());
  EXPECT_EQ(broker_->Stop(), 0) << "SIGTERM on a full disk";
  FreeFiller();
  ASSERT_TRUE(broker_->Start()) << "see " << mnt_ << ".log";
  Connect();
  ExpectStoredIsAcknowledged();
}

}  // namespace
}  // namespace tokimq
