// One replica of a broker group for the consumer-group state replication tests
// (group_state_replication_test.cc, group_state_rejoin_test.cc): a real MessageStore +
// TimerStore (RealBackend), a RocksDB, a GroupStateLog and a ConsumerService, on a shared
// ManualClock. A leader's ConsumerService logs its writes (the broker's hook); a follower's
// replays the records its store dispatches. Close / Open reopen the stores and the service and
// keep the RocksDB, as a broker restart does. Single-threaded tests only.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/consumer_service.h"
#include "common/clock.h"
#include "consumer/consumer_env.h"
#include "consumer/consumer_service_impl.h"
#include "replication/group_state_log.h"
#include "replication/group_state_record.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"
#include "test_util.h"

namespace tokimq::testing {

struct Replica {
  Replica(ManualClock* clock, std::string dir, bool leader)
      : clock(clock), dir(std::move(dir)), backend(clock, this->dir) {
    std::filesystem::create_directories(this->dir);
    rocksdb::Options opts;
    opts.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(opts, this->dir + "/meta", &raw).ok());
    db.reset(raw);
    Open(leader);
  }
  ~Replica() {
    Close();
    db.reset();
  }

  // Opens the stores, the GroupStateLog and the ConsumerService (its recovery reads RocksDB).
  void Open(bool leader) {
    EXPECT_TRUE(backend.Open().ok());
    log = std::make_unique<broker::GroupStateLog>(backend.store(), db.get(), clock);
    if (leader) log->SetLeading(true);
    backend.store()->SetDispatchListener([this](const std::string& t, int32_t q, QueueOffset o) {
      if (t == broker::kGroupStateTopic) {
        EXPECT_TRUE(log->CatchUp().ok());
      } else if (svc) {
        svc->OnDispatch(t, q, o);
      }
    });
    ConsumerServiceDeps deps;
    deps.clock = clock;
    deps.store = backend.store();
    deps.timers = backend.timers();
    deps.db = db.get();
    deps.queue_count = [](const std::string& topic) -> absl::StatusOr<int> {
      if (topic == "t" || topic.rfind("%", 0) == 0) return 1;
      return absl::NotFoundError(topic);
    };
    auto s = consumer::ConsumerServiceImpl::Create(std::move(deps));
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return;
    svc = std::move(*s);
    impl = dynamic_cast<consumer::ConsumerServiceImpl*>(svc.get());
    // The broker's hook on a leader; a follower writes no records (it does not lead).
    if (leader) LogWrites();
  }
  void Close() {
    svc.reset();
    impl = nullptr;
    log.reset();
    EXPECT_TRUE(backend.Close().ok());
  }
  void LogWrites() {
    impl->SetStateWriteLog([this](const rocksdb::WriteBatch& b) { return log->Append(b); });
  }

  // Every "group/" key and value.
  std::map<std::string, std::string> GroupKeys() const {
    std::map<std::string, std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek("group/"); it->Valid() && it->key().starts_with("group/"); it->Next()) {
      out[it->key().ToString()] = it->value().ToString();
    }
    return out;
  }

  std::vector<ReceivedMessage> Recv(int max, int64_t invisible_ms, const std::string& group = "g",
                                    const std::string& topic = "t") {
    ReceiveRequest req;
    req.group = group;
    req.topic = topic;
    req.max_messages = max;
    req.invisible_ms = invisible_ms;
    auto r = svc->Receive(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : std::vector<ReceivedMessage>{};
  }

  ManualClock* clock;
  std::string dir;
  RealBackend backend;
  std::unique_ptr<rocksdb::DB> db;
  std::unique_ptr<broker::GroupStateLog> log;
  std::unique_ptr<ConsumerService> svc;
  consumer::ConsumerServiceImpl* impl = nullptr;
};

}  // namespace tokimq::testing
