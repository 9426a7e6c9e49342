// Redis sorted-set delay queue driver (RESP over TcpStream): see drivers.h.
#include <deque>
#include <thread>

#include "common/clock.h"
#include "drivers.h"
#include "net.h"

namespace tokimq::bench {
namespace {

// A RESP reply: kind '+', '-', ':', '$' (nil: is_nil) or '*'.
struct Reply {
  char kind = 0;
  std::string str;
  int64_t integer = 0;
  bool is_nil = false;
  std::vector<Reply> elements;
};

absl::Status ReadReply(TcpStream* s, Reply* r, int depth = 0) {
  if (depth > 4) return absl::InternalError("redis: reply nested too deep");
  std::string line;
  absl::Status st = s->ReadLine(&line);
  if (!st.ok()) return st;
  if (line.empty()) return absl::InternalError("redis: empty reply line");
  r->kind = line[0];
  std::string rest = line.substr(1);
  switch (r->kind) {
    case '+':
      r->str = rest;
      return absl::OkStatus();
    case '-':
      r->str = rest;
      return absl::InternalError("redis: " + rest);
    case ':':
      r->integer = std::stoll(rest);
      return absl::OkStatus();
    case '$': {
      int64_t n = std::stoll(rest);
      if (n < 0) {
        r->is_nil = true;
        return absl::OkStatus();
      }
      if (n > (512 << 20)) return absl::InternalError("redis: bulk string too large");
      st = s->ReadExact(static_cast<size_t>(n) + 2, &r->str);
      if (st.ok()) r->str.resize(static_cast<size_t>(n));
      return st;
    }
    case '*': {
      int64_t n = std::stoll(rest);
      if (n < 0) {
        r->is_nil = true;
        return absl::OkStatus();
      }
      if (n > (1 << 24)) return absl::InternalError("redis: array too large");
      r->elements.resize(static_cast<size_t>(n));
      for (Reply& e : r->elements) {
        st = ReadReply(s, &e, depth + 1);
        if (!st.ok()) return st;
      }
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("redis: bad reply type " + line.substr(0, 16));
  }
}

void AppendCommand(std::string* out, const std::vector<std::string>& args) {
  out->push_back('*');
  out->append(std::to_string(args.size()));
  out->append("\r\n");
  for (const std::string& a : args) {
    out->push_back('$');
    out->append(std::to_string(a.size()));
    out->append("\r\n");
    out->append(a);
    out->append("\r\n");
  }
}

absl::StatusOr<Reply> Call(TcpStream* s, const std::vector<std::string>& args) {
  std::string cmd;
  AppendCommand(&cmd, args);
  absl::Status st = s->WriteAll(cmd);
  if (!st.ok()) return st;
  Reply r;
  st = ReadReply(s, &r);
  if (!st.ok()) return st;
  return r;
}

// Moves up to ARGV[2] members with score <= ARGV[1] from the delayed zset to the ready list.
constexpr char kMoveScript[] = R"(
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return 0 end
redis.call('ZREM', KEYS[1], unpack(due))
redis.call('RPUSH', KEYS[2], unpack(due))
return #due)";

// Pops up to ARGV[1] ready members and leases them until ARGV[2] (ms) in the inflight zset.
constexpr char kPopScript[] = R"(
local items = redis.call('LPOP', KEYS[1], tonumber(ARGV[1]))
if not items then return {} end
local args = {}
for _, m in ipairs(items) do args[#args + 1] = ARGV[2]; args[#args + 1] = m end
redis.call('ZADD', KEYS[2], unpack(args))
return items)";

struct Keys {
  std::string delayed, ready, inflight;
  explicit Keys(const std::string& p)
      : delayed(p + ":delayed"), ready(p + ":ready"), inflight(p + ":inflight") {}
};

class RedisProducer final : public ProducerSession {
 public:
  RedisProducer(std::unique_ptr<TcpStream> s, Keys keys, int pipeline)
      : s_(std::move(s)), keys_(std::move(keys)), pipeline_(pipeline) {}
  absl::Status Send(std::vector<BenchMessage> batch) override {
    std::vector<std::string> args;
    args.reserve(2 + 2 * batch.size());
    args.push_back("ZADD");
    args.push_back(keys_.delayed);
    for (BenchMessage& m : batch) {
      args.push_back(std::to_string(m.deliver_ms));
      args.push_back(std::move(m.body));
    }
    std::string cmd;
    AppendCommand(&cmd, args);
    absl::Status st = s_->WriteAll(cmd);
    if (!st.ok()) return st;
    ++pending_;
    while (pending_ >= pipeline_) {
      st = ReadOne();
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    while (pending_ > 0) {
      absl::Status st = ReadOne();
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status ReadOne() {
    Reply r;
    --pending_;
    return ReadReply(s_.get(), &r);
  }
  std::unique_ptr<TcpStream> s_;
  Keys keys_;
  int pipeline_;
  int pending_ = 0;
};

class RedisConsumer final : public ConsumerSession {
 public:
  RedisConsumer(std::unique_ptr<TcpStream> s, Keys keys, std::string pop_sha, int64_t lease_ms)
      : s_(std::move(s)), keys_(std::move(keys)), pop_sha_(std::move(pop_sha)),
        lease_ms_(lease_ms) {}
  absl::StatusOr<std::vector<Received>> Receive(int max, int64_t wait_ms) override {
    Clock& clock = *SystemClock::Default();
    const int64_t until = clock.NowMs() + wait_ms;
    while (true) {
      const int64_t now = clock.NowMs();
      // An ack from AckAndReceive goes in the same write, its reply first.
      std::string cmd = std::move(pending_ack_);
      pending_ack_.clear();
      const bool ack_reply = !cmd.empty();
      AppendCommand(&cmd, {"EVALSHA", pop_sha_, "2", keys_.ready, keys_.inflight,
                           std::to_string(max), std::to_string(now + lease_ms_)});
      if (absl::Status st = s_->WriteAll(cmd); !st.ok()) return st;
      Reply ack;
      if (ack_reply) {
        if (absl::Status st = ReadReply(s_.get(), &ack); !st.ok()) return st;
      }
      Reply r;
      if (absl::Status st = ReadReply(s_.get(), &r); !st.ok()) return st;
      std::vector<Received> out;
      for (Reply& e : r.elements) {
        Received m;
        if (!ParseBody(e.str, &m.deliver_ms, &m.seq)) continue;
        m.handle = std::move(e.str);
        out.push_back(std::move(m));
      }
      if (!out.empty() || now >= until) return out;
      clock.WaitUntilMs(now + 1, std::chrono::milliseconds(1));  // poll: Lua cannot block
    }
  }
  absl::Status Ack(const std::vector<Received>& msgs) override {
    if (msgs.empty()) return absl::OkStatus();
    return Call(s_.get(), AckArgs(msgs)).status();
  }

  // The ZREM is pipelined with the pop script: one write, one round trip.
  absl::StatusOr<std::vector<Received>> AckAndReceive(const std::vector<Received>& acks, int max,
                                                      int64_t wait_ms) override {
    if (!acks.empty()) AppendCommand(&pending_ack_, AckArgs(acks));
    return Receive(max, wait_ms);
  }

 private:
  std::vector<std::string> AckArgs(const std::vector<Received>& msgs) const {
    std::vector<std::string> args{"ZREM", keys_.inflight};
    for (const Received& m : msgs) args.push_back(m.handle);
    return args;
  }
  std::unique_ptr<TcpStream> s_;
  std::string pending_ack_;  // a ZREM written before the next pop script
  Keys keys_;
  std::string pop_sha_;
  int64_t lease_ms_;
};

class RedisDriver final : public Driver {
 public:
  explicit RedisDriver(const DriverOptions& o) : options_(o), keys_(o.queue) {}
  ~RedisDriver() override { Stop(); }

  absl::Status Setup() override {
    auto s = TcpStream::Connect(options_.addr);
    if (!s.ok()) return s.status();
    auto del = Call(s->get(), {"DEL", keys_.delayed, keys_.ready, keys_.inflight});
    if (!del.ok()) return del.status();
    auto move = Call(s->get(), {"SCRIPT", "LOAD", kMoveScript});
    if (!move.ok()) return move.status();
    auto pop = Call(s->get(), {"SCRIPT", "LOAD", kPopScript});
    if (!pop.ok()) return pop.status();
    move_sha_ = move->str;
    pop_sha_ = pop->str;
    mover_conn_ = std::move(*s);
    mover_ = std::thread([this] { MoverLoop(); });
    return absl::OkStatus();
  }

  void Stop() override {
    stop_ = true;
    if (mover_.joinable()) mover_.join();
  }

  absl::StatusOr<std::unique_ptr<ProducerSession>> NewProducer() override {
    auto s = TcpStream::Connect(options_.addr);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ProducerSession>(
        new RedisProducer(std::move(*s), keys_, std::max(1, options_.pipeline)));
  }
  absl::StatusOr<std::unique_ptr<ConsumerSession>> NewConsumer() override {
    auto s = TcpStream::Connect(options_.addr);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ConsumerSession>(
        new RedisConsumer(std::move(*s), keys_, pop_sha_, options_.lease_ms));
  }
  absl::Status Ping() override {
    auto s = TcpStream::Connect(options_.addr);
    if (!s.ok()) return s.status();
    return Call(s->get(), {"PING"}).status();  // -LOADING while the AOF is replayed
  }

 private:
  // The mover: what a Redis delay queue needs besides Redis (e.g. BullMQ's delayed->wait step).
  void MoverLoop() {
    Clock& clock = *SystemClock::Default();
    while (!stop_) {
      const int64_t now = clock.NowMs();
      auto r = Call(mover_conn_.get(), {"EVALSHA", move_sha_, "2", keys_.delayed, keys_.ready,
                                        std::to_string(now), "1000"});
      if (!r.ok()) {
        mover_error_ = true;
        clock.WaitUntilMs(now + 100, std::chrono::milliseconds(100));
        continue;
      }
      if (r->integer < 1000) clock.WaitUntilMs(now + 1, std::chrono::milliseconds(1));
    }
  }

  DriverOptions options_;
  Keys keys_;
  std::string move_sha_, pop_sha_;
  std::unique_ptr<TcpStream> mover_conn_;
  std::thread mover_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> mover_error_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Driver>> NewRedisDriver(const DriverOptions& o) {
  return std::unique_ptr<Driver>(new RedisDriver(o));
}

}  // namespace tokimq::bench
