#include "client/cluster_consumer.h"

#include <algorithm>
#include <chrono>

#include "fmt/format.h"

namespace tokimq::client {

ClusterConsumer::ClusterConsumer(ClientOptions bootstrap, std::string group,
                                 int64_t route_refresh_ms, Clock* clock)
    : clock_(clock), routes_(std::move(bootstrap), route_refresh_ms, clock), group_(std::move(group)) {}

ClusterConsumer::~ClusterConsumer() {
  std::vector<std::future<void>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks = std::move(tasks_);
  }
  for (std::future<void>& t : tasks) t.wait();
}

SimpleConsumer* ClusterConsumer::ConsumerFor(const std::string& broker,
                                             const std::string& address) {
  auto& [known, consumer] = consumers_[broker];
  if (!consumer || known != address) {
    consumer = std::make_unique<SimpleConsumer>(routes_.OptionsFor(address), group_);
    known = address;
  }
  return consumer.get();
}

absl::StatusOr<std::vector<ReceivedMessage>> ClusterConsumer::Receive(
    const std::string& topic, const ReceiveOptions& options) {
  absl::StatusOr<proto::RouteResponse> route = routes_.Get(topic);
  if (!route.ok()) return route.status();
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  const int64_t now = clock_->NowMs();
  int64_t earliest_retry = INT64_MAX;
  for (const proto::BrokerRoute& b : route->brokers()) {
    if (!b.live()) continue;
    const std::string key = topic + "|" + b.broker();
    auto cool = cooldown_.find(b.broker());
    if (cool != cooldown_.end() && cool->second > now && !polls_.count(key)) {
      earliest_retry = std::min(earliest_retry, cool->second);
      continue;  // failed a moment ago (down or restarting)
    }
    keys.push_back(key);
    if (polls_.count(key)) continue;  // still open from an earlier Receive
    SimpleConsumer* consumer = ConsumerFor(b.broker(), b.address());
    auto poll = std::make_shared<Poll>();
    polls_[key] = poll;
    // Finished poll threads are dropped here (a future of std::async blocks in its destructor
    // until the thread is done, so none is destroyed while its thread runs).
    std::erase_if(tasks_, [](std::future<void>& t) {
      return t.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
    tasks_.push_back(std::async(std::launch::async, [this, poll, consumer, topic, options] {
      auto r = consumer->Receive(topic, options);
      std::lock_guard<std::mutex> l(mu_);
      poll->result = std::move(r);
      poll->done = true;
      cv_.notify_all();
    }));
  }
  if (keys.empty() && earliest_retry != INT64_MAX) {
    cv_.wait_for(lock, std::chrono::milliseconds(earliest_retry - now));  // every live broker failed just now: pause, not spin
    return std::vector<ReceivedMessage>{};
  }
  if (keys.empty()) {
    routes_.Invalidate(topic);
    return absl::UnavailableError(fmt::format("no live broker hosts '{}'", topic));
  }
  auto any_done = [&] {
    for (const std::string& k : keys) {
      if (polls_[k]->done) return true;
    }
    return false;
  };
  cv_.wait(lock, any_done);
  std::vector<ReceivedMessage> out;
  absl::Status first_error;
  bool any_ok = false;
  for (const std::string& k : keys) {
    std::shared_ptr<Poll> poll = polls_[k];
    if (!poll->done) continue;
    polls_.erase(k);
    const std::string broker = k.substr(topic.size() + 1);
    if (!poll->result.ok()) {
      if (first_error.ok()) first_error = poll->result.status();
      cooldown_[broker] = clock_->NowMs() + kBrokerRetryDelayMs;
      continue;
    }
    any_ok = true;
    for (ReceivedMessage& m : *poll->result) {
      m.receipt_handle = JoinBrokerHandle(broker, m.receipt_handle);
      out.push_back(std::move(m));
    }
  }
  if (!first_error.ok()) routes_.Invalidate(topic);  // a broker failed: re-read who is live
  (void)any_ok;  // a down broker must not stop consumption from the others: no error
  return out;
}

absl::StatusOr<SimpleConsumer*> ClusterConsumer::ConsumerOfHandle(const std::string& joined,
                                                                  std::string* broker,
                                                                  std::string* handle) {
  if (absl::Status s = SplitBrokerHandle(joined, broker, handle); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = consumers_.find(*broker);
    if (it != consumers_.end()) return it->second.second.get();
  }
  absl::StatusOr<std::string> address = routes_.AddressOf(*broker);
  if (!address.ok()) return address.status();
  std::lock_guard<std::mutex> lock(mu_);
  return ConsumerFor(*broker, *address);
}

absl::Status ClusterConsumer::Ack(const std::string& receipt_handle) {
  std::string broker, handle;
  absl::StatusOr<SimpleConsumer*> c = ConsumerOfHandle(receipt_handle, &broker, &handle);
  if (!c.ok()) return c.status();
  return (*c)->Ack(handle);
}

absl::StatusOr<std::vector<absl::Status>> ClusterConsumer::AckBatch(
    const std::vector<std::string>& handles) {
  std::vector<absl::Status> out(handles.size());
  std::map<std::string, std::pair<SimpleConsumer*, std::vector<size_t>>> by_broker;
  std::vector<std::string> inner(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    std::string broker;
    absl::StatusOr<SimpleConsumer*> c = ConsumerOfHandle(handles[i], &broker, &inner[i]);
    if (!c.ok()) {
      out[i] = c.status();
      continue;
    }
    auto& entry = by_broker[broker];
    entry.first = *c;
    entry.second.push_back(i);
  }
  for (auto& [broker, entry] : by_broker) {
    std::vector<std::string> part;
    for (size_t i : entry.second) part.push_back(inner[i]);
    absl::StatusOr<std::vector<absl::Status>> r = entry.first->AckBatch(part);
    for (size_t k = 0; k < entry.second.size(); ++k) {
      out[entry.second[k]] = r.ok() ? (*r)[k] : r.status();
    }
  }
  return out;
}

absl::StatusOr<std::string> ClusterConsumer::ChangeInvisibleDuration(
    const std::string& receipt_handle, int64_t invisible_ms) {
  std::string broker, handle;
  absl::StatusOr<SimpleConsumer*> c = ConsumerOfHandle(receipt_handle, &broker, &handle);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string> renewed = (*c)->ChangeInvisibleDuration(handle, invisible_ms);
  if (!renewed.ok()) return renewed.status();
  return JoinBrokerHandle(broker, *renewed);
}

absl::Status ClusterConsumer::Nack(const std::string& receipt_handle,
                                   std::optional<int64_t> delay_ms) {
  std::string broker, handle;
  absl::StatusOr<SimpleConsumer*> c = ConsumerOfHandle(receipt_handle, &broker, &handle);
  if (!c.ok()) return c.status();
  return (*c)->Nack(handle, delay_ms);
}

}  // namespace tokimq::client
