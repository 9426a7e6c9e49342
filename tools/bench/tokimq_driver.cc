// tokimq driver: see drivers.h.
#include <condition_variable>
#include <mutex>

#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "common/clock.h"
#include "drivers.h"

namespace tokimq::bench {
namespace {

class TokimqProducer final : public ProducerSession {
 public:
  TokimqProducer(const DriverOptions& o, client::ClientOptions co)
      : options_(o), producer_(std::move(co)), state_(std::make_shared<State>()) {}
  ~TokimqProducer() override { (void)Flush(); }

  absl::Status Send(std::vector<BenchMessage> batch) override {
    std::vector<client::OutgoingMessage> msgs;
    msgs.reserve(batch.size());
    for (BenchMessage& m : batch) {
      client::OutgoingMessage om;
      om.topic = options_.queue;
      om.body = std::move(m.body);
      om.deliver_at_ms = m.deliver_ms;
      msgs.push_back(std::move(om));
    }
    if (options_.pipeline == 1) {
      // One send in flight (workload f): the synchronous call, as such a producer would make
      // it; the caller reads its own answer (no hand-off through the connection's reader
      // thread), like the peers' drivers with a pipeline of 1.
      auto r = producer_.SendBatch(msgs);
      return r.status();
    }
    {
      std::unique_lock<std::mutex> lock(state_->mu);
      state_->cv.wait(lock, [&] { return state_->in_flight < options_.pipeline; });
      if (!state_->error.ok()) return state_->error;
      ++state_->in_flight;
    }
    producer_.SendBatchAsync(msgs, [st = state_](absl::StatusOr<std::vector<client::SendReceipt>> r) {
      std::lock_guard<std::mutex> lock(st->mu);
      if (!r.ok() && st->error.ok()) st->error = r.status();
      --st->in_flight;
      st->cv.notify_all();
    });
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->in_flight == 0; });
    return state_->error;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int in_flight = 0;
    absl::Status error;
  };
  DriverOptions options_;
  client::Producer producer_;
  std::shared_ptr<State> state_;
};

class TokimqConsumer final : public ConsumerSession {
 public:
  TokimqConsumer(const DriverOptions& o, client::ClientOptions co)
      : options_(o), consumer_(std::move(co), "bench-" + o.queue) {}

  absl::StatusOr<std::vector<Received>> Receive(int max, int64_t wait_ms) override {
    return AckAndReceive({}, max, wait_ms);
  }

  // The acks ride in the receive (ReceiveRequest.ack_receipt_handles): one round trip.
  absl::StatusOr<std::vector<Received>> AckAndReceive(const std::vector<Received>& acks, int max,
                                                      int64_t wait_ms) override {
    client::ReceiveOptions ro;
    ro.max_messages = max;
    ro.invisible_ms = options_.lease_ms;
    ro.long_poll_ms = wait_ms;
    std::vector<std::string> handles;
    handles.reserve(acks.size());
    for (const Received& r : acks) handles.push_back(r.handle);
    std::vector<absl::Status> acked;
    auto got = consumer_.AckAndReceive(handles, options_.queue, ro, &acked);
    if (!got.ok()) return got.status();
    for (const absl::Status& s : acked) {
      if (!s.ok()) return s;
    }
    std::vector<Received> out;
    out.reserve(got->size());
    for (client::ReceivedMessage& m : *got) {
      Received r;
      if (!ParseBody(m.body, &r.deliver_ms, &r.seq)) continue;
      r.handle = std::move(m.receipt_handle);
      out.push_back(std::move(r));
    }
    return out;
  }

  absl::Status Ack(const std::vector<Received>& msgs) override {
    if (msgs.empty()) return absl::OkStatus();
    std::vector<std::string> handles;
    handles.reserve(msgs.size());
    for (const Received& r : msgs) handles.push_back(r.handle);
    auto results = consumer_.AckBatch(handles);
    if (!results.ok()) return results.status();
    for (const absl::Status& s : *results) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  DriverOptions options_;
  client::SimpleConsumer consumer_;
};

class TokimqDriver final : public Driver {
 public:
  explicit TokimqDriver(const DriverOptions& o) : options_(o) {
    client_.broker = o.addr;
    client_.access_key = o.access_key;
    client_.secret_key = o.secret_key;
    client_.tls = o.tls;
    client_.tls_ca_file = o.tls_ca_file;
  }

  absl::Status Setup() override {
    client::AdminClient admin(client_);
    auto topics = admin.ListTopics();
    if (!topics.ok()) return topics.status();
    for (const proto::TopicConfig& t : *topics) {
      if (t.name() == options_.queue) return absl::OkStatus();
    }
    proto::TopicConfig t;
    t.set_name(options_.queue);
    t.set_type(proto::DELAY);
    t.set_max_delay_ms(7LL * 24 * 3600 * 1000);
    auto created = admin.CreateTopic(t);
    return created.status();
  }

  absl::StatusOr<std::unique_ptr<ProducerSession>> NewProducer() override {
    return std::unique_ptr<ProducerSession>(new TokimqProducer(options_, client_));
  }
  absl::StatusOr<std::unique_ptr<ConsumerSession>> NewConsumer() override {
    return std::unique_ptr<ConsumerSession>(new TokimqConsumer(options_, client_));
  }
  absl::Status Ping() override {
    client::AdminClient admin(client_);
    return admin.ListTopics().status();
  }

  absl::StatusOr<ReleaseSnapshot> SnapshotRelease() override {
    if (!stats_admin_) stats_admin_ = std::make_unique<client::AdminClient>(client_);
    auto st = stats_admin_->Stats();
    if (!st.ok()) return st.status();
    ReleaseSnapshot r;
    r.taken_ms = SystemClock::Default()->NowMs();
    for (const proto::TopicStats& t : st->topics()) {
      if (t.name() != options_.queue) continue;
      for (const auto& q : t.queues()) r.topic_messages += q.max_offset();
    }
    const proto::TimerStats& tm = st->timer();
    for (const proto::LatenessBucket& b : tm.lateness_buckets()) {
      r.lateness.buckets.push_back(HistogramBucket{b.upper_ms(), b.count()});
    }
    r.lateness.count = tm.lateness_count();
    r.lateness.max = tm.lateness_max_ms();
    return r;
  }

  absl::StatusOr<int64_t> LogSyncs() override {
    if (!stats_admin_) stats_admin_ = std::make_unique<client::AdminClient>(client_);
    auto st = stats_admin_->Stats();
    if (!st.ok()) return st.status();
    return st->commitlog_syncs();
  }

 private:
  DriverOptions options_;
  client::ClientOptions client_;
  std::unique_ptr<client::AdminClient> stats_admin_;  // one connection for all snapshots
};

}  // namespace

absl::StatusOr<std::unique_ptr<Driver>> NewTokimqDriver(const DriverOptions& o) {
  return std::unique_ptr<Driver>(new TokimqDriver(o));
}

}  // namespace tokimq::bench
