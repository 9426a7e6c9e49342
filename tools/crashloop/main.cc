// tokimq-crashloop: the crash-loop harness.
//
// Runs the real tokimq-broker binary on a fixed port and a data dir, drives a delayed-send +
// lease workload against it with the C++ client (one producer, two consumers of one group that
// ack most messages, renew some and leave a few to expire), and kills the broker with SIGKILL
// at random instants N times (every k-th twice: kill, restart, kill again 50 ms to 2 s after it
// serves). With --manual-clock the broker's clock only moves
// while it is up (a restart takes no broker time, like a fast release build). Then it stops
// sending, waits until everything acknowledged is due, drains the topic and checks the history of
// every acknowledged send, every receive and every ack:
//   lost       an acknowledged send never received                                  must be 0
//   early      received before its deliver time (broker's TIMER_DEQUEUE_MS, else the
//              local receive time; same host clock)                                  must be 0
//   duplicate  one message id at two different (topic, queue, offset) positions with
//              delivery attempt 1: the broker stored the message twice               must be 0
//   unexpected a body that was never sent                                            must be 0
// A redelivery after a lease expiry (attempt >= 2, retry topic) is not a duplicate; two retry
// copies with the same attempt are reported (docs/operations.md "Delivery guarantees" case 3)
// but do not fail the run. Sends that failed (broker killed meanwhile) may or may not be
// stored: they are never "lost", but may not be duplicated either.
//
// This is a tool, not a unit test: it runs on the real clock and sleeps. Exit code 0 when every
// check passes, 1 when one fails, 2 when the harness itself could not run (broker did not
// start). tests/crash/crash_loop.sh runs it; ctest runs a short version (label "crash").
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "common/parse_int.h"
#include "common/property_keys.h"

namespace {

using Clock = std::chrono::system_clock;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

void SleepMs(int64_t ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

struct Options {
  std::string broker_bin;
  std::string work_dir;
  int kills = 10;
  int double_kill_every = 3;  // every k-th kill is followed by a second one within a second
  int64_t min_up_ms = 700;
  int64_t max_up_ms = 2'500;
  int64_t second_kill_min_ms = 50;  // a double kill's second kill, after the restart
  int64_t second_kill_max_ms = 2'000;
  int64_t max_delay_ms = 8'000;
  int batch = 40;
  int64_t batch_interval_ms = 25;
  std::string flush = "async";
  std::string precision = "1s";
  int64_t drain_timeout_ms = 120'000;
  uint64_t seed = 0;
  // Run the broker on its manual clock and advance it 20 ms every 20 ms of real time, never
  // while the broker is down: a restart then takes no broker time, as with a fast (release)
  // build, which is when a crash soon after a restart can catch the timer store mid-recovery.
  bool manual_clock = false;
};

// The broker process: fork/exec on a fixed port, SIGKILL, restart.
class Broker {
 public:
  explicit Broker(const Options& o) : o_(o) {}
  ~Broker() {
    if (pid_ > 0) Signal(SIGKILL);
  }

  bool Start() {
    const std::string port_file = o_.work_dir + "/broker.port";
    std::filesystem::remove(port_file);
    std::vector<std::string> args = {o_.broker_bin,
                                     "--data-dir",
                                     o_.work_dir + "/data",
                                     "--port",
                                     std::to_string(port_),
                                     "--port-file",
                                     port_file,
                                     "--log-file",
                                     o_.work_dir + "/broker.log",
                                     "--flush",
                                     o_.flush,
                                     "--timer-precision",
                                     o_.precision,
                                     "--grpc-port",
                                     "0",
                                     "--http-port",
                                     "0",
                                     "-c",
                                     o_.work_dir + "/broker.toml"};
    if (o_.manual_clock) args.push_back("--manual-clock");
    // Built before the fork: the child of a multi-threaded process may only make
    // async-signal-safe calls until execv. An allocation there can deadlock on an allocator
    // lock another thread held at the fork (seen once in a full ASan ctest: the restarted
    // broker never started, "did not restart after kill 2", nothing in its log).
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file);
      int port = 0;
      if (in >> port && port > 0) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      SleepMs(10);
    }
    return false;
  }

  // Returns the exit status (128 + signal when killed).
  int Signal(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void set_port(int port) { port_ = port; }
  int port() const { return port_; }

 private:
  const Options& o_;
  pid_t pid_ = -1;
  int port_ = 0;
};

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

struct SentRecord {
  std::string message_id;
  int64_t deliver_at_ms = 0;  // 0: sent for immediate delivery
};

struct ReceiveRecord {
  std::string body;
  std::string message_id;
  std::string topic;
  int32_t queue_id = 0;
  int64_t queue_offset = -1;
  int attempt = 0;
  int64_t local_ms = 0;
  int64_t dequeue_ms = -1;  // TIMER_DEQUEUE_MS when present
};

// Everything the workload saw. Thread-safe.
class History {
 public:
  void Acked(const std::string& body, SentRecord r) {
    std::lock_guard<std::mutex> l(mu_);
    sent_[body] = std::move(r);
  }
  void Unknown(const std::string& body) {
    std::lock_guard<std::mutex> l(mu_);
    unknown_.insert(body);
  }
  void Received(ReceiveRecord r) {
    std::lock_guard<std::mutex> l(mu_);
    receives_.push_back(std::move(r));
    last_receive_ms_ = NowMs();
  }
  void AckOk(const std::string& body) {
    std::lock_guard<std::mutex> l(mu_);
    acked_.insert(body);
  }
  int64_t AckedSendsNotReceived() const {
    std::lock_guard<std::mutex> l(mu_);
    std::set<std::string> got;
    for (const ReceiveRecord& r : receives_) got.insert(r.body);
    int64_t n = 0;
    for (const auto& [body, s] : sent_) n += got.count(body) == 0 ? 1 : 0;
    return n;
  }
  int64_t last_receive_ms() const {
    std::lock_guard<std::mutex> l(mu_);
    return last_receive_ms_;
  }
  int64_t max_deliver_ms() const {
    std::lock_guard<std::mutex> l(mu_);
    int64_t m = 0;
    for (const auto& [body, s] : sent_) m = std::max(m, s.deliver_at_ms);
    return m;
  }

  struct Verdict {
    int64_t sent = 0, unknown = 0, receives = 0, redeliveries = 0, never_acked = 0;
    int64_t lost = 0, early = 0, duplicates = 0, unexpected = 0, retry_duplicates = 0;
    std::vector<std::string> examples;
  };
  Verdict Check() const {
    std::lock_guard<std::mutex> l(mu_);
    Verdict v;
    v.sent = static_cast<int64_t>(sent_.size());
    v.unknown = static_cast<int64_t>(unknown_.size());
    v.receives = static_cast<int64_t>(receives_.size());
    // body -> attempt -> distinct positions
    std::map<std::string, std::map<int, std::set<std::tuple<std::string, int32_t, int64_t>>>> pos;
    for (const ReceiveRecord& r : receives_) {
      if (r.attempt > 1) ++v.redeliveries;
      pos[r.body][r.attempt].insert({r.topic, r.queue_id, r.queue_offset});
      auto it = sent_.find(r.body);
      if (it == sent_.end()) {
        if (unknown_.count(r.body) == 0) {
          if (v.unexpected++ < 5) v.examples.push_back("unexpected body " + r.body);
        }
        continue;
      }
      const int64_t due = it->second.deliver_at_ms;
      const int64_t at = r.dequeue_ms >= 0 ? r.dequeue_ms : r.local_ms;
      if (due > 0 && at < due) {
        if (v.early++ < 5) {
          v.examples.push_back("early " + r.body + ": at " + std::to_string(at) + " < due " +
                               std::to_string(due));
        }
      }
    }
    for (const auto& [body, by_attempt] : pos) {
      for (const auto& [attempt, positions] : by_attempt) {
        if (positions.size() <= 1) continue;
        if (attempt == 1) {
          if (v.duplicates++ < 5) {
            std::ostringstream os;
            os << "duplicate " << body << " at";
            for (const auto& [t, q, o] : positions) os << " " << t << "/" << q << "#" << o;
            v.examples.push_back(os.str());
          }
        } else {
          ++v.retry_duplicates;
        }
      }
    }
    for (const auto& [body, s] : sent_) {
      if (pos.count(body) == 0) {
        if (v.lost++ < 5) v.examples.push_back("lost " + body + " (" + s.message_id + ")");
      }
      if (acked_.count(body) == 0) ++v.never_acked;
    }
    return v;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, SentRecord> sent_;
  std::set<std::string> unknown_;
  std::vector<ReceiveRecord> receives_;
  std::set<std::string> acked_;
  int64_t last_receive_ms_ = 0;
};

constexpr char kTopic[] = "crashloop";
constexpr char kGroup[] = "crashloop";

void ProducerLoop(const Options& o, const tokimq::client::ClientOptions& co, History* h,
                  std::atomic<bool>* stop, std::atomic<int64_t>* errors) {
  tokimq::client::Producer producer(co);
  std::mt19937_64 rng(o.seed * 7 + 1);
  int64_t seq = 0;
  while (!stop->load()) {
    std::vector<tokimq::client::OutgoingMessage> batch(static_cast<size_t>(o.batch));
    for (auto& m : batch) {
      m.topic = kTopic;
      m.body = "m";  // not "m" + to_string(): gcc 12 -O3 reports a false -Wrestrict there
      m.body += std::to_string(seq++);
      m.key = m.body;
      const int64_t delay = static_cast<int64_t>(rng() % static_cast<uint64_t>(o.max_delay_ms + 1));
      if (rng() % 10 != 0) m.delay_ms = std::max<int64_t>(delay, 1);  // 1 in 10: immediate
    }
    auto r = producer.SendBatch(batch);
    if (r.ok() && r->size() == batch.size()) {
      for (size_t i = 0; i < batch.size(); ++i) {
        const auto& rec = (*r)[i];
        h->Acked(batch[i].body, {rec.message_id, rec.delayed ? rec.deliver_at_ms : 0});
      }
    } else {
      errors->fetch_add(1);
      for (const auto& m : batch) h->Unknown(m.body);
      SleepMs(50);
    }
    SleepMs(o.batch_interval_ms);
  }
}

void ConsumerLoop(int index, const Options& o, const tokimq::client::ClientOptions& co, History* h,
                  std::atomic<bool>* stop) {
  tokimq::client::SimpleConsumer consumer(co, kGroup);
  std::mt19937_64 rng(o.seed * 13 + 3 + static_cast<uint64_t>(index));
  tokimq::client::ReceiveOptions ro;
  ro.max_messages = 32;
  ro.invisible_ms = 2'000;
  ro.long_poll_ms = 500;
  while (!stop->load()) {
    auto r = consumer.Receive(kTopic, ro);
    if (!r.ok()) {
      SleepMs(50);
      continue;
    }
    const int64_t now = NowMs();
    std::vector<std::string> handles, bodies;
    for (const auto& m : *r) {
      ReceiveRecord rec;
      rec.body = m.body;
      rec.message_id = m.message_id;
      rec.topic = m.topic;
      rec.queue_id = m.queue_id;
      rec.queue_offset = m.queue_offset.value();
      rec.attempt = m.delivery_attempt;
      rec.local_ms = now;
      auto d = m.properties.find(tokimq::prop::kTimerDequeueMs);
      if (d != m.properties.end()) tokimq::ParseInt64(d->second, &rec.dequeue_ms);
      h->Received(std::move(rec));
      const uint64_t dice = rng() % 100;
      if (dice < 3) continue;  // leave it: the lease expires and it comes back (attempt + 1)
      std::string handle = m.receipt_handle;
      if (dice < 8) {  // renew first
        auto renewed = consumer.ChangeInvisibleDuration(handle, 2'000);
        if (!renewed.ok()) continue;
        handle = *renewed;
      }
      handles.push_back(handle);
      bodies.push_back(m.body);
    }
    if (handles.empty()) continue;
    auto acks = consumer.AckBatch(handles);
    if (!acks.ok()) continue;
    for (size_t i = 0; i < acks->size() && i < bodies.size(); ++i) {
      if ((*acks)[i].ok()) h->AckOk(bodies[i]);
    }
  }
}

int CountLines(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tokimq-crashloop: kill -9 the broker under a delayed + lease workload, check "
      "lost / early / duplicates"};
  // The last of repeated options wins (crash_loop.sh passes its defaults, then the caller's).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Options o;
  app.add_option("--broker-bin", o.broker_bin, "path of tokimq-broker")->required();
  app.add_option("--work-dir", o.work_dir, "fresh directory for data, logs, config")->required();
  app.add_option("--kills", o.kills, "number of kill -9 (double kills count twice)");
  app.add_option("--double-kill-every", o.double_kill_every,
                 "every k-th kill is followed by a second within a second (0: never)");
  app.add_option("--min-up-ms", o.min_up_ms, "shortest uptime before a kill");
  app.add_option("--max-up-ms", o.max_up_ms, "longest uptime before a kill");
  app.add_option("--second-kill-min-ms", o.second_kill_min_ms,
                 "a double kill's second kill comes this long after the restart at the earliest");
  app.add_option("--second-kill-max-ms", o.second_kill_max_ms, "... and at the latest");
  app.add_option("--max-delay-ms", o.max_delay_ms, "delays are uniform in [1, this]");
  app.add_option("--batch", o.batch, "messages per send request");
  app.add_option("--batch-interval-ms", o.batch_interval_ms, "pause between send requests");
  app.add_option("--flush", o.flush, "async or sync");
  app.add_option("--timer-precision", o.precision, "e.g. 1s or 100ms");
  app.add_option("--drain-timeout-ms", o.drain_timeout_ms, "give up draining after this");
  app.add_option("--seed", o.seed, "random seed (0: from the time)");
  app.add_flag("--manual-clock", o.manual_clock,
               "broker on its manual clock, advanced 20 ms per 20 ms while it is up");
  CLI11_PARSE(app, argc, argv);
  if (o.seed == 0) o.seed = static_cast<uint64_t>(NowMs());
  std::filesystem::create_directories(o.work_dir);
  {
    std::ofstream cfg(o.work_dir + "/broker.toml");
    // Quick redelivery so the final drain does not wait for the default 10 s backoff.
    cfg << "[group.crashloop]\nbackoff = [\"300ms\"]\nmax_attempts = 1000\n";
  }
  std::printf("crashloop: seed %llu, %d kills, work dir %s\n",
              static_cast<unsigned long long>(o.seed), o.kills, o.work_dir.c_str());
  std::fflush(stdout);

  Broker broker(o);
  broker.set_port(FreePort());
  if (broker.port() <= 0 || !broker.Start()) {
    std::fprintf(stderr, "crashloop: broker did not start (see %s/broker.log)\n",
                 o.work_dir.c_str());
    return 2;
  }
  tokimq::client::ClientOptions co;
  co.broker = "127.0.0.1:" + std::to_string(broker.port());
  co.connect_timeout_ms = 1'000;
  co.request_timeout_ms = 5'000;
  {
    tokimq::client::AdminClient admin(co);
    tokimq::proto::TopicConfig t;
    t.set_name(kTopic);
    t.set_queues(4);
    t.set_type(tokimq::proto::DELAY);
    auto created = admin.CreateTopic(t);
    if (!created.ok()) {
      std::fprintf(stderr, "crashloop: create topic: %s\n", created.status().ToString().c_str());
      return 2;
    }
  }

  History history;
  std::atomic<bool> stop_send{false}, stop_consume{false};
  std::atomic<int64_t> send_errors{0};
  std::thread producer(ProducerLoop, std::cref(o), std::cref(co), &history, &stop_send,
                       &send_errors);
  std::vector<std::thread> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.emplace_back(ConsumerLoop, i, std::cref(o), std::cref(co), &history, &stop_consume);
  }

  std::thread clock_driver;
  std::atomic<bool> stop_clock{false};
  if (o.manual_clock) {
    clock_driver = std::thread([&co, &stop_clock] {
      tokimq::client::AdminClient admin(co);
      while (!stop_clock.load()) {
        SleepMs(20);
        (void)admin.AdvanceClock(20);  // fails while the broker is down: no time passes then
      }
    });
  }
  auto stop_clock_driver = [&] {
    stop_clock = true;
    if (clock_driver.joinable()) clock_driver.join();
  };

  std::mt19937_64 rng(o.seed);
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, hi - lo)));
  };
  int kills = 0, double_kills = 0;
  int64_t restart_total_ms = 0, restart_max_ms = 0;
  auto kill_and_restart = [&]() -> bool {
    broker.Signal(SIGKILL);
    ++kills;
    const int64_t t0 = NowMs();
    if (!broker.Start()) return false;
    const int64_t took = NowMs() - t0;
    restart_total_ms += took;
    restart_max_ms = std::max(restart_max_ms, took);
    return true;
  };
  bool ok = true;
  for (int k = 0; ok && kills < o.kills; ++k) {
    SleepMs(uniform(o.min_up_ms, o.max_up_ms));
    ok = kill_and_restart();
    if (ok && o.double_kill_every > 0 && (k + 1) % o.double_kill_every == 0 && kills < o.kills) {
      // The second kill within a second of serving again, or after 1-2 s: past the recovered
      // store's first timer checkpoint.
      SleepMs(uniform(o.second_kill_min_ms, o.second_kill_max_ms));
      ok = kill_and_restart();
      ++double_kills;
    }
  }
  if (!ok) {
    std::fprintf(stderr, "crashloop: broker did not restart after kill %d (see %s/broker.log)\n",
                 kills, o.work_dir.c_str());
    stop_send = true;
    stop_consume = true;
    producer.join();
    for (auto& c : consumers) c.join();
    stop_clock_driver();
    return 2;
  }
  // Stop sending; let everything acknowledged fall due and drain.
  stop_send = true;
  producer.join();
  const int64_t due_end = history.max_deliver_ms() + 1'000;
  const int64_t drain_deadline = std::max(NowMs(), due_end) + o.drain_timeout_ms;
  while (NowMs() < drain_deadline) {
    SleepMs(250);
    if (NowMs() < due_end) continue;
    // Done when every acknowledged send was received and nothing came for 3 s (leases of
    // un-acked messages expire after 2 s, then a 300 ms backoff: their redeliveries are in).
    // Not "every one acked": an Ack whose reply was lost to a kill took effect, and its message
    // never comes back.
    if (history.AckedSendsNotReceived() == 0 && NowMs() - history.last_receive_ms() > 3'000) {
      break;
    }
  }
  stop_consume = true;
  for (auto& c : consumers) c.join();
  stop_clock_driver();
  const int term_status = broker.Signal(SIGTERM);

  const History::Verdict v = history.Check();
  const std::string log = o.work_dir + "/broker.log";
  std::printf(
      "crashloop: kills %d (%d double: a second kill 0-2 s after the restart), restart avg %lld ms "
      "max %lld "
      "ms, recoveries logged %d\n",
      kills, double_kills, static_cast<long long>(kills > 0 ? restart_total_ms / kills : 0),
      static_cast<long long>(restart_max_ms), CountLines(log, "timerstore: recovered"));
  std::printf(
      "crashloop: sends acknowledged %lld, failed (unknown outcome) %lld in %lld requests; "
      "receives %lld (redeliveries %lld); never acked OK by a consumer %lld\n",
      static_cast<long long>(v.sent), static_cast<long long>(v.unknown),
      static_cast<long long>(send_errors.load()), static_cast<long long>(v.receives),
      static_cast<long long>(v.redeliveries), static_cast<long long>(v.never_acked));
  std::printf(
      "crashloop: lost %lld, early %lld, broker duplicates %lld, unexpected %lld (retry copies "
      "with the same attempt: %lld); final SIGTERM exit %d\n",
      static_cast<long long>(v.lost), static_cast<long long>(v.early),
      static_cast<long long>(v.duplicates), static_cast<long long>(v.unexpected),
      static_cast<long long>(v.retry_duplicates), term_status);
  for (const std::string& e : v.examples) std::printf("crashloop:   %s\n", e.c_str());
  const bool pass = v.lost == 0 && v.early == 0 && v.duplicates == 0 && v.unexpected == 0 &&
                    v.sent > 0 && term_status == 0;
  std::printf("crashloop: %s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
