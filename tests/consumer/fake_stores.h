// In-memory MessageStore and TimerStore for ConsumerService tests: same contracts as the real
// ones (offsets, dispatch callbacks, never-early delivery), no files. An object outlives a
// simulated restart of the consumer service, standing in for durable storage.
#pragma once

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "timerstore/timer_store.h"

namespace tokimq::testing {

class FakeMessageStore final : public MessageStore {
 public:
  explicit FakeMessageStore(Clock* clock) : clock_(clock) {}

  absl::StatusOr<PutResult> Put(Message msg) override {
    if (!msg.encoded_properties.empty()) {
      // As the real store: both forms set is refused; the stored message reads back with the
      // map, as a decoded record does.
      if (!msg.properties.empty()) {
        return absl::InvalidArgumentError("message has both properties and encoded_properties");
      }
      if (!record::DecodeProperties(msg.encoded_properties, &msg.properties)) {
        return absl::InvalidArgumentError("malformed encoded_properties");
      }
      msg.encoded_properties.clear();
    }
    PutResult r;
    std::string topic = msg.topic;
    int32_t qid = msg.queue_id;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto& q = queues_[{topic, qid}];
      msg.queue_offset = QueueOffset(static_cast<int64_t>(q.size()));
      msg.physical_offset = PhysicalOffset(next_phys_);
      msg.store_ms = clock_->NowMs();
      next_phys_ += 100;
      r.physical_offset = msg.physical_offset;
      r.queue_offset = msg.queue_offset;
      r.size = 100;
      q.push_back(std::move(msg));
    }
    DispatchListener listener;
    {
      std::lock_guard<std::mutex> l(mu_);
      listener = listener_;
    }
    if (listener) listener(topic, qid, r.queue_offset);
    return r;
  }
  absl::StatusOr<std::vector<PutResult>> PutBatch(std::vector<Message> msgs) override {
    std::vector<PutResult> out;
    for (auto& m : msgs) {
      auto r = Put(std::move(m));
      if (!r.ok()) return r.status();
      out.push_back(*r);
    }
    return out;
  }
  absl::StatusOr<Message> Read(PhysicalOffset physical_offset) const override {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [k, q] : queues_) {
      for (const auto& m : q) {
        if (m.physical_offset == physical_offset) return m;
      }
    }
    return absl::NotFoundError("no record");
  }
  absl::StatusOr<std::optional<ConsumeQueueEntry>> GetEntry(const std::string& topic,
                                                            int32_t queue_id,
                                                            QueueOffset queue_offset) const override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = queues_.find({topic, queue_id});
    if (it == queues_.end() || queue_offset.value() >= static_cast<int64_t>(it->second.size())) {
      return std::optional<ConsumeQueueEntry>();
    }
    const Message& m = it->second[static_cast<size_t>(queue_offset.value())];
    return std::optional<ConsumeQueueEntry>(ConsumeQueueEntry{m.physical_offset, 100, 0});
  }
  absl::StatusOr<std::vector<Message>> ReadQueue(const std::string& topic, int32_t queue_id,
                                                 QueueOffset from_offset,
                                                 int max_count) const override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<Message> out;
    auto it = queues_.find({topic, queue_id});
    if (it == queues_.end()) return out;
    for (int64_t o = std::max<int64_t>(from_offset.value(), 0);
         o < static_cast<int64_t>(it->second.size()) && static_cast<int>(out.size()) < max_count;
         ++o) {
      out.push_back(it->second[static_cast<size_t>(o)]);
    }
    return out;
  }
  QueueOffset MinQueueOffset(const std::string&, int32_t) const override {
    return QueueOffset(0);
  }
  QueueOffset MaxQueueOffset(const std::string& topic, int32_t queue_id) const override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = queues_.find({topic, queue_id});
    return QueueOffset(it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size()));
  }
  void SetDispatchListener(DispatchListener listener) override {
    std::lock_guard<std::mutex> l(mu_);
    listener_ = std::move(listener);
  }
  void AddPinProvider(PinProvider) override {}
  absl::StatusOr<int> DeleteExpired(int64_t) override { return 0; }
  absl::Status Flush() override { return absl::OkStatus(); }
  CommitLog* commit_log() override { return nullptr; }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  Clock* clock_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int32_t>, std::vector<Message>> queues_;
  int64_t next_phys_ = 0;
  DispatchListener listener_;
};

class FakeTimerStore final : public TimerStore {
 public:
  FakeTimerStore(Clock* clock, MessageStore* store) : clock_(clock), store_(store) {}

  absl::StatusOr<ScheduleResult> Schedule(Message msg, int64_t deliver_ms) override {
    ScheduleResult r;
    if (deliver_ms <= clock_->NowMs()) {
      auto put = store_->Put(std::move(msg));
      if (!put.ok()) return put.status();
      r.put = *put;
      r.delivered_now = true;
      return r;
    }
    std::lock_guard<std::mutex> l(mu_);
    msg.properties[prop::kDeliverMs] = std::to_string(deliver_ms);
    pending_.emplace(deliver_ms, std::move(msg));
    r.recall_handle = "fake";
    return r;
  }
  absl::Status Recall(std::string_view) override { return absl::NotFoundError("fake"); }
  absl::Status RunUntilIdle() override {
    while (true) {
      Message m;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (pending_.empty() || pending_.begin()->first > clock_->NowMs()) break;
        m = std::move(pending_.begin()->second);
        pending_.erase(pending_.begin());
      }
      auto put = store_->Put(std::move(m));
      if (!put.ok()) return put.status();
    }
    return absl::OkStatus();
  }
  absl::Status Start() override { return absl::OkStatus(); }
  absl::Status Stop() override { return absl::OkStatus(); }
  absl::Status Checkpoint() override { return absl::OkStatus(); }
  TimerMetrics& metrics() override { return metrics_; }

  size_t pending() const {
    std::lock_guard<std::mutex> l(mu_);
    return pending_.size();
  }

 private:
  Clock* clock_;
  MessageStore* store_;
  mutable std::mutex mu_;
  std::multimap<int64_t, Message> pending_;
  TimerMetrics metrics_;
};

}  // namespace tokimq::testing
