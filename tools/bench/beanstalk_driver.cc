// beanstalkd driver (its text protocol over TcpStream): see drivers.h.
// put <pri> <delay s> <ttr s> <bytes>; reserve-with-timeout; delete <id>. Commands are
// pipelined (beanstalkd answers them in order).
#include "common/clock.h"
#include "drivers.h"
#include "net.h"

namespace tokimq::bench {
namespace {

absl::Status Expect(TcpStream* s, const std::string& prefix, std::string* line) {
  absl::Status st = s->ReadLine(line);
  if (!st.ok()) return st;
  if (line->rfind(prefix, 0) != 0) return absl::InternalError("beanstalkd: " + *line);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TcpStream>> ConnectTube(const std::string& addr,
                                                       const std::string& tube, bool consumer) {
  auto s = TcpStream::Connect(addr);
  if (!s.ok()) return s.status();
  std::string line;
  if (consumer) {
    absl::Status st = (*s)->WriteAll("watch " + tube + "\r\nignore default\r\n");
    if (st.ok()) st = Expect(s->get(), "WATCHING", &line);
    if (st.ok()) st = Expect(s->get(), "WATCHING", &line);
    if (!st.ok()) return st;
  } else {
    absl::Status st = (*s)->WriteAll("use " + tube + "\r\n");
    if (st.ok()) st = Expect(s->get(), "USING", &line);
    if (!st.ok()) return st;
  }
  return s;
}

class BeanstalkProducer final : public ProducerSession {
 public:
  BeanstalkProducer(std::unique_ptr<TcpStream> s, int64_t ttr_s, int pipeline)
      : s_(std::move(s)), ttr_s_(ttr_s), pipeline_(pipeline) {}
  absl::Status Send(std::vector<BenchMessage> batch) override {
    const int64_t now = SystemClock::Default()->NowMs();
    std::string out;
    for (const BenchMessage& m : batch) {
      // Whole seconds only: round up so that nothing is ever early.
      int64_t delay_s = m.deliver_ms > now ? (m.deliver_ms - now + 999) / 1000 : 0;
      out += "put 0 " + std::to_string(delay_s) + " " + std::to_string(ttr_s_) + " " +
             std::to_string(m.body.size()) + "\r\n";
      out += m.body;
      out += "\r\n";
    }
    absl::Status st = s_->WriteAll(out);
    if (!st.ok()) return st;
    pending_ += batch.size();
    batches_.push_back(batch.size());
    while (static_cast<int>(batches_.size()) >= pipeline_) {
      st = ReadBatch();
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    while (!batches_.empty()) {
      absl::Status st = ReadBatch();
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status ReadBatch() {
    size_t n = batches_.front();
    batches_.erase(batches_.begin());
    std::string line;
    for (size_t i = 0; i < n; ++i) {
      absl::Status st = Expect(s_.get(), "INSERTED", &line);
      if (!st.ok()) return st;
    }
    pending_ -= n;
    return absl::OkStatus();
  }
  std::unique_ptr<TcpStream> s_;
  int64_t ttr_s_;
  int pipeline_;
  size_t pending_ = 0;
  std::vector<size_t> batches_;
};

class BeanstalkConsumer final : public ConsumerSession {
 public:
  explicit BeanstalkConsumer(std::unique_ptr<TcpStream> s) : s_(std::move(s)) {}

  absl::StatusOr<std::vector<Received>> Receive(int max, int64_t wait_ms) override {
    return AckAndReceive({}, max, wait_ms);
  }

  // The deletes go in the same write as the reserve sweep (beanstalkd answers in order).
  absl::StatusOr<std::vector<Received>> AckAndReceive(const std::vector<Received>& acks, int max,
                                                      int64_t wait_ms) override {
    std::vector<Received> out;
    // First a pipelined sweep of non-blocking reserves, then one blocking reserve if empty.
    std::string cmds;
    for (const Received& m : acks) cmds += "delete " + m.handle + "\r\n";
    for (int i = 0; i < max; ++i) cmds += "reserve-with-timeout 0\r\n";
    absl::Status st = s_->WriteAll(cmds);
    if (!st.ok()) return st;
    std::string line;
    for (size_t i = 0; st.ok() && i < acks.size(); ++i) st = Expect(s_.get(), "DELETED", &line);
    if (!st.ok()) return st;
    for (int i = 0; i < max; ++i) {
      st = ReadReserve(&out);
      if (!st.ok()) return st;
    }
    if (!out.empty() || wait_ms <= 0) return out;
    st = s_->WriteAll("reserve-with-timeout " + std::to_string((wait_ms + 999) / 1000) + "\r\n");
    if (st.ok()) st = ReadReserve(&out);
    if (!st.ok()) return st;
    return out;
  }

  absl::Status Ack(const std::vector<Received>& msgs) override {
    std::string cmds;
    for (const Received& m : msgs) cmds += "delete " + m.handle + "\r\n";
    absl::Status st = s_->WriteAll(cmds);
    std::string line;
    for (size_t i = 0; st.ok() && i < msgs.size(); ++i) st = Expect(s_.get(), "DELETED", &line);
    return st;
  }

 private:
  absl::Status ReadReserve(std::vector<Received>* out) {
    std::string line;
    absl::Status st = s_->ReadLine(&line);
    if (!st.ok()) return st;
    if (line == "TIMED_OUT" || line == "DEADLINE_SOON") return absl::OkStatus();
    // RESERVED <id> <bytes>
    char id[32];
    size_t bytes = 0;
    if (std::sscanf(line.c_str(), "RESERVED %31s %zu", id, &bytes) != 2 || bytes > (64u << 20)) {
      return absl::InternalError("beanstalkd: " + line);
    }
    std::string body;
    st = s_->ReadExact(bytes + 2, &body);
    if (!st.ok()) return st;
    body.resize(bytes);
    Received r;
    r.handle = id;
    if (ParseBody(body, &r.deliver_ms, &r.seq)) out->push_back(std::move(r));
    return absl::OkStatus();
  }
  std::unique_ptr<TcpStream> s_;
};

class BeanstalkDriver final : public Driver {
 public:
  explicit BeanstalkDriver(const DriverOptions& o) : options_(o) {}
  absl::Status Setup() override { return Ping(); }
  absl::StatusOr<std::unique_ptr<ProducerSession>> NewProducer() override {
    auto s = ConnectTube(options_.addr, options_.queue, false);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ProducerSession>(new BeanstalkProducer(
        std::move(*s), std::max<int64_t>(1, options_.lease_ms / 1000), std::max(1, options_.pipeline)));
  }
  absl::StatusOr<std::unique_ptr<ConsumerSession>> NewConsumer() override {
    auto s = ConnectTube(options_.addr, options_.queue, true);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ConsumerSession>(new BeanstalkConsumer(std::move(*s)));
  }
  absl::Status Ping() override {
    auto s = TcpStream::Connect(options_.addr);
    if (!s.ok()) return s.status();
    std::string line;
    absl::Status st = (*s)->WriteAll("list-tubes\r\n");
    if (st.ok()) st = Expect(s->get(), "OK", &line);
    return st;
  }

 private:
  DriverOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Driver>> NewBeanstalkDriver(const DriverOptions& o) {
  return std::unique_ptr<Driver>(new BeanstalkDriver(o));
}

}  // namespace tokimq::bench
