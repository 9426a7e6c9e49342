// Test fixture for ConsumerService: a ManualClock, a RocksDB in a TempDir, and a storage
// backend (in-memory fakes). Restart() closes and reopens the service and the DB, keeping the
// backend's data, as a broker restart would.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "broker/consumer_service.h"
#include "common/clock.h"
#include "common/file.h"
#include "consumer/fake_stores.h"
#include "rocksdb/db.h"
#include "test_util.h"

namespace tokimq::testing {

// Storage under test; Reopen simulates closing and reopening the stores.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual MessageStore* store() = 0;
  virtual TimerStore* timers() = 0;
  virtual absl::Status Reopen() = 0;
};

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(Clock* clock) : store_(clock), timers_(clock, &store_) {}
  MessageStore* store() override { return &store_; }
  TimerStore* timers() override { return &timers_; }
  absl::Status Reopen() override { return absl::OkStatus(); }

 private:
  FakeMessageStore store_;
  FakeTimerStore timers_;
};

// The real CommitLog-backed MessageStore and the real TimerStore in a directory.
class RealBackend final : public Backend {
 public:
  RealBackend(Clock* clock, std::string dir) : clock_(clock), dir_(std::move(dir)) {}
  MessageStore* store() override { return store_.get(); }
  TimerStore* timers() override { return timers_.get(); }
  absl::Status Open() {
    MessageStoreOptions mo;
    mo.dir = dir_ + "/store";
    mo.commitlog.segment_size = 1 << 20;
    mo.commitlog.flush_mode = FlushMode::kSync;
    mo.commitlog.async_flush_interval_ms = 0;
    mo.consume_queue_segment_entries = 1024;
    auto store = MessageStore::Open(FileSystem::Default(), clock_, mo);
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
    TimerStoreOptions to;
    to.dir = dir_ + "/timer";
    to.precision_ms = 1000;
    to.window_ms = 2LL * 24 * 3600 * 1000;
    auto timers = TimerStore::Open(FileSystem::Default(), clock_, store_.get(), to);
    if (!timers.ok()) return timers.status();
    timers_ = std::move(*timers);
    return absl::OkStatus();
  }
  absl::Status Reopen() override {
    absl::Status s = Close();
    if (!s.ok()) return s;
    return Open();
  }
  absl::Status Close() {
    absl::Status s;
    if (timers_) s.Update(timers_->Checkpoint());
    timers_.reset();
    if (store_) s.Update(store_->Close());
    store_.reset();
    return s;
  }
  ~RealBackend() override { Close().IgnoreError(); }

 private:
  Clock* clock_;
  std::string dir_;
  std::unique_ptr<MessageStore> store_;
  std::unique_ptr<TimerStore> timers_;
};

// Parameter: "fake" (in-memory stores) or "real" (MessageStore + TimerStore on disk).
class ConsumerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    queues_ = {{"t", 1}, {"orders", 4}, {"a", 1}, {"b", 1}, {"f", 1}, {"f2", 2}};
    fifo_topics_ = {"f", "f2"};
    if (GetParam() == "real") {
      auto real = std::make_unique<RealBackend>(&clock_, dir_.Join("data"));
      absl::Status s = real->Open();
      ASSERT_TRUE(s.ok()) << s;
      backend_ = std::move(real);
    } else {
      backend_ = std::make_unique<FakeBackend>(&clock_);
    }
    OpenAll();
  }
  void TearDown() override {
    CloseAll();
    backend_.reset();
  }

  void OpenAll() {
    rocksdb::Options opts;
    opts.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(opts, dir_.Join("meta"), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    db_.reset(db);
    store()->SetDispatchListener([this](const std::string& t, int32_t q, QueueOffset o) {
      if (ConsumerService* svc = svc_ptr_.load()) svc->OnDispatch(t, q, o);
    });
    ConsumerServiceDeps deps;
    deps.clock = &clock_;
    deps.store = store();
    deps.timers = timers();
    deps.db = db_.get();
    deps.queue_count = [this](const std::string& topic) -> absl::StatusOr<int> {
      auto it = queues_.find(topic);
      if (it == queues_.end()) return absl::NotFoundError("no topic " + topic);
      return it->second;
    };
    deps.is_fifo = [this](const std::string& topic) { return fifo_topics_.contains(topic); };
    deps.group_orderly = [this](const std::string& group) -> std::optional<bool> {
      auto it = group_orderly_.find(group);
      if (it == group_orderly_.end()) return std::nullopt;
      return it->second;
    };
    auto svc = NewConsumerService(std::move(deps));
    ASSERT_TRUE(svc.ok()) << svc.status();
    svc_ = std::move(*svc);
    svc_ptr_ = svc_.get();
  }
  void CloseAll() {
    svc_ptr_ = nullptr;
    svc_.reset();
    db_.reset();
  }
  void Restart() {
    CloseAll();
    ASSERT_TRUE(backend_->Reopen().ok());
    OpenAll();
  }

  MessageStore* store() { return backend_->store(); }
  TimerStore* timers() { return backend_->timers(); }

  void Send(const std::string& topic, int32_t qid, const std::string& body,
            const std::string& tag = "") {
    Message m;
    m.topic = topic;
    m.queue_id = qid;
    m.body = body;
    m.born_ms = clock_.NowMs();
    if (!tag.empty()) m.properties[prop::kTag] = tag;
    ASSERT_TRUE(store()->Put(std::move(m)).ok());
  }

  // A message of FIFO message group `group` (the broker sets MSG_GROUP the same way).
  void SendToGroup(const std::string& topic, int32_t qid, const std::string& group,
                   const std::string& body) {
    Message m;
    m.topic = topic;
    m.queue_id = qid;
    m.body = body;
    m.born_ms = clock_.NowMs();
    m.properties[prop::kMessageGroup] = group;
    ASSERT_TRUE(store()->Put(std::move(m)).ok());
  }

  // Moves time forward and lets timers and lease expiry run to quiescence.
  void Advance(int64_t ms) {
    clock_.AdvanceMs(ms);
    Settle();
  }
  void Settle() {
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(timers()->RunUntilIdle().ok());
      ASSERT_TRUE(svc_->RunUntilIdle().ok());
    }
  }

  std::vector<ReceivedMessage> Recv(const std::string& group, const std::string& topic,
                                    int max = 16, int64_t invisible_ms = 30'000,
                                    const std::string& filter = "") {
    ReceiveRequest req;
    req.group = group;
    req.topic = topic;
    req.max_messages = max;
    req.invisible_ms = invisible_ms;
    req.tag_filter = filter;
    auto r = svc_->Receive(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : std::vector<ReceivedMessage>{};
  }

  static std::vector<std::string> Bodies(const std::vector<ReceivedMessage>& msgs) {
    std::vector<std::string> out;
    for (const auto& m : msgs) out.push_back(m.message.body);
    return out;
  }

  TempDir dir_;
  ManualClock clock_;
  std::map<std::string, int> queues_;
  std::set<std::string> fifo_topics_;
  // Stored delivery order per group (true: Orderly); groups not here have none stored.
  std::map<std::string, bool> group_orderly_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<ConsumerService> svc_;
  std::atomic<ConsumerService*> svc_ptr_{nullptr};
};

}  // namespace tokimq::testing
