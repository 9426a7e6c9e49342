#include "runner.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "common/clock.h"

namespace tokimq::bench {
namespace {

// RssAnon / RssFile of a process in kB, from /proc/<pid>/status. Zeros if unreadable.
void ReadRss(int pid, int64_t* anon_kb, int64_t* file_kb) {
  *anon_kb = *file_kb = 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key) {
    if (key == "RssAnon:" && in >> value >> unit) *anon_kb = value;
    else if (key == "RssFile:" && in >> value >> unit) *file_kb = value;
  }
}

class RssSampler {
 public:
  RssSampler(int pid, Result* r) : pid_(pid), r_(r) {
    if (pid_ <= 0) return;
    int64_t file = 0;
    ReadRss(pid_, &r_->rss_anon_kb_before, &file);
    thread_ = std::thread([this] { Loop(); });
  }
  ~RssSampler() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (pid_ > 0) Sample();
  }

 private:
  void Sample() {
    int64_t anon = 0, file = 0;
    ReadRss(pid_, &anon, &file);
    std::lock_guard<std::mutex> lock(mu_);
    r_->rss_anon_kb_max = std::max(r_->rss_anon_kb_max, anon);
    r_->rss_file_kb_max = std::max(r_->rss_file_kb_max, file);
    r_->rss_anon_kb_end = anon;
  }
  void Loop() {
    Clock& clock = *SystemClock::Default();
    while (!stop_) {
      Sample();
      clock.WaitUntilMs(clock.NowMs() + 200, std::chrono::milliseconds(200));
    }
  }
  int pid_;
  Result* r_;
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

double Pct(const std::vector<int64_t>& sorted_us, double p) {
  if (sorted_us.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(sorted_us.size() - 1) + 0.5);
  return static_cast<double>(sorted_us[std::min(i, sorted_us.size() - 1)]) / 1000.0;
}

// Polls the broker's release figures every kReleasePollMs until the run's topic holds
// `expected` more messages than at `before`, or until stopped. Records the first poll that saw
// them all, relative to `hot_start_ms`, and the poll before it.
class ReleasePoller {
 public:
  ReleasePoller(Driver* driver, const ReleaseSnapshot& before, uint64_t expected,
                int64_t hot_start_ms)
      : driver_(driver),
        before_(before),
        expected_(static_cast<int64_t>(expected)),
        hot_start_ms_(hot_start_ms),
        thread_([this] { Loop(); }) {}
  ~ReleasePoller() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // After Stop: -1 when never seen.
  int64_t released_ms() const { return released_ms_; }
  int64_t poll_before_ms() const { return poll_before_ms_; }
  const std::string& error() const { return error_; }

 private:
  void Loop() {
    Clock& clock = *SystemClock::Default();
    int64_t previous_ms = -1;
    while (!stop_) {
      auto snap = driver_->SnapshotRelease();
      if (!snap.ok()) {
        if (error_.empty()) error_ = snap.status().ToString();
      } else if (snap->topic_messages - before_.topic_messages >= expected_) {
        released_ms_ = snap->taken_ms - hot_start_ms_;
        poll_before_ms_ = previous_ms;
        return;
      } else {
        previous_ms = snap->taken_ms - hot_start_ms_;
      }
      clock.WaitUntilMs(clock.NowMs() + kReleasePollMs, std::chrono::milliseconds(kReleasePollMs));
    }
  }
  Driver* driver_;
  ReleaseSnapshot before_;
  int64_t expected_;
  int64_t hot_start_ms_;
  std::atomic<bool> stop_{false};
  int64_t released_ms_ = -1, poll_before_ms_ = -1;  // written by the thread, read after Stop
  std::string error_;
  std::thread thread_;  // last: starts after the fields above are set
};

}  // namespace

Result Run(Driver* driver, const Workload& w) {
  Clock& clock = *SystemClock::Default();
  Result res;
  std::mutex err_mu;
  auto fail = [&](const absl::Status& s) {
    std::lock_guard<std::mutex> lock(err_mu);
    ++res.errors;
    if (res.first_error.empty()) res.first_error = s.ToString();
  };
  const bool consume = w.mode != "enqueue";
  const bool consume_after = w.mode == "lease";
  // Broker-side release figures: a snapshot before anything is sent and one after the consumers
  // finished; systems without them answer kUnimplemented.
  std::optional<ReleaseSnapshot> release_before;
  if (w.mode == "e2e" && w.delay != DelayKind::kNow) {
    auto snap = driver->SnapshotRelease();
    if (snap.ok()) {
      release_before = std::move(*snap);
    } else if (!absl::IsUnimplemented(snap.status())) {
      res.release_error = snap.status().ToString();
    }
  }
  const int64_t t0 = clock.NowMs();
  const int64_t hot_start = (t0 + w.hot_lead_ms) / 1000 * 1000 + 1000;
  const int64_t give_up = t0 + w.max_run_ms;
  std::optional<ReleasePoller> poller;
  if (release_before && w.delay == DelayKind::kHot) {
    poller.emplace(driver, *release_before, w.messages, hot_start);
  }

  absl::StatusOr<int64_t> syncs_before = driver->LogSyncs();
  RssSampler rss(w.rss_pid, &res);
  std::vector<std::atomic<uint8_t>> seen(w.messages);
  std::atomic<uint64_t> next{0}, sent{0}, received{0}, dups{0}, early{0};
  std::atomic<int64_t> first_deliver{INT64_MAX}, last_deliver{0}, last_recv{0}, enqueue_end{0};
  std::atomic<bool> stop_consumers{false};
  std::vector<std::vector<int64_t>> lateness(static_cast<size_t>(std::max(1, w.consumers)));

  auto producer_fn = [&](int index) {
    auto p = driver->NewProducer();
    if (!p.ok()) return fail(p.status());
    std::mt19937_64 rng(static_cast<uint64_t>(index) * 7919 + 17);
    const uint64_t batch = static_cast<uint64_t>(std::max(1, w.batch));
    while (true) {
      uint64_t first = next.fetch_add(batch);
      if (first >= w.messages || clock.NowMs() > give_up) break;
      if (w.rate > 0) {  // paced: batch `first` leaves at t0 + first / rate
        const int64_t at = t0 + static_cast<int64_t>(static_cast<double>(first) * 1000.0 / w.rate);
        if (at > clock.NowMs()) clock.WaitUntilMs(at, std::chrono::milliseconds(at - clock.NowMs()));
      }
      uint64_t end = std::min(w.messages, first + batch);
      const int64_t now = clock.NowMs();
      std::vector<BenchMessage> msgs;
      msgs.reserve(end - first);
      for (uint64_t seq = first; seq < end; ++seq) {
        int64_t d = now;
        switch (w.delay) {
          case DelayKind::kUniform:
            d = now + w.delay_lo_ms +
                static_cast<int64_t>(rng() % static_cast<uint64_t>(w.delay_hi_ms - w.delay_lo_ms + 1));
            break;
          case DelayKind::kHot:
            d = hot_start + static_cast<int64_t>(rng() % 1000);
            break;
          case DelayKind::kSpread:
            d = hot_start + static_cast<int64_t>(seq % 1000);
            break;
          case DelayKind::kFixed:
            d = now + w.delay_lo_ms;
            break;
          case DelayKind::kNow:
            d = now;
            break;
        }
        int64_t cur = first_deliver.load();
        while (d < cur && !first_deliver.compare_exchange_weak(cur, d)) {
        }
        cur = last_deliver.load();
        while (d > cur && !last_deliver.compare_exchange_weak(cur, d)) {
        }
        msgs.push_back(BenchMessage{d, MakeBody(d, seq, w.body_size)});
      }
      absl::Status s = (*p)->Send(std::move(msgs));
      if (!s.ok()) return fail(s);
      sent.fetch_add(end - first);
    }
    absl::Status s = (*p)->Flush();
    if (!s.ok()) fail(s);
  };

  auto consumer_fn = [&](int index) {
    auto c = driver->NewConsumer();
    if (!c.ok()) return fail(c.status());
    std::vector<int64_t>& lat = lateness[static_cast<size_t>(index)];
    std::vector<Received> unacked;  // the last batch: acked with the next receive
    while (!stop_consumers && received.load() < w.messages && clock.NowMs() < give_up) {
      absl::StatusOr<std::vector<Received>> got;
      if (w.ack_with_receive) {
        got = (*c)->AckAndReceive(unacked, w.receive_batch, 200);
        unacked.clear();  // acked, or failed (the run then fails)
      } else {
        got = (*c)->Receive(w.receive_batch, 200);
      }
      const int64_t now_us = clock.NowMicros();
      if (!got.ok()) {
        fail(got.status());
        clock.WaitUntilMs(now_us / 1000 + 100, std::chrono::milliseconds(100));
        continue;
      }
      for (const Received& r : *got) {
        if (r.seq >= w.messages) continue;
        if (seen[r.seq].exchange(1) != 0) {
          dups.fetch_add(1);
          continue;
        }
        const int64_t late_us = now_us - r.deliver_ms * 1000;
        if (late_us < 0) early.fetch_add(1);
        lat.push_back(late_us);
        received.fetch_add(1);
      }
      if (!got->empty()) {
        int64_t now_ms = now_us / 1000, cur = last_recv.load();
        while (now_ms > cur && !last_recv.compare_exchange_weak(cur, now_ms)) {
        }
        if (w.ack_with_receive) {
          unacked = std::move(*got);
        } else if (absl::Status s = (*c)->Ack(*got); !s.ok()) {
          fail(s);
        }
      }
    }
    if (absl::Status s = (*c)->Ack(unacked); !s.ok()) fail(s);
  };

  std::vector<std::thread> producers, consumers;
  int64_t consume_start = 0;
  if (consume && !consume_after) {
    consume_start = clock.NowMs();
    for (int i = 0; i < std::max(1, w.consumers); ++i) consumers.emplace_back(consumer_fn, i);
  }
  for (int i = 0; i < std::max(1, w.producers); ++i) producers.emplace_back(producer_fn, i);
  for (auto& t : producers) t.join();
  enqueue_end = clock.NowMs();
  res.sent = sent.load();
  if (syncs_before.ok()) {
    absl::StatusOr<int64_t> syncs_after = driver->LogSyncs();
    if (syncs_after.ok()) {
      res.log_syncs = *syncs_after - *syncs_before;
      if (res.sent > 0) res.syncs_per_msg = static_cast<double>(res.log_syncs) / res.sent;
    }
  }
  res.enqueue_s = (enqueue_end.load() - t0) / 1000.0;
  res.enqueue_rate = res.enqueue_s > 0 ? res.sent / res.enqueue_s : 0;
  if (consume && consume_after) {
    consume_start = clock.NowMs();
    for (int i = 0; i < std::max(1, w.consumers); ++i) consumers.emplace_back(consumer_fn, i);
  }
  if (!consume) {
    // Let the broker settle (dispatch, timer enqueue) before the last RSS sample.
    clock.WaitUntilMs(clock.NowMs() + 2000, std::chrono::milliseconds(2000));
  }
  for (auto& t : consumers) t.join();
  rss.Stop();
  if (poller) {
    poller->Stop();
    if (res.release_error.empty()) res.release_error = poller->error();
  }
  if (release_before) {
    absl::StatusOr<ReleaseSnapshot> after = driver->SnapshotRelease();
    absl::StatusOr<HistogramSnapshot> window =
        after.ok() ? HistogramSnapshot::Delta(release_before->lateness, after->lateness)
                   : absl::StatusOr<HistogramSnapshot>(after.status());
    if (window.ok()) {
      res.release_p50_ms = window->Percentile(0.5);
      res.release_p99_ms = window->Percentile(0.99);
      res.release_max_ms = window->max;
      res.released = window->count;
      res.released_to_topic = after->topic_messages - release_before->topic_messages;
    } else if (res.release_error.empty()) {
      res.release_error = window.status().ToString();
    }
  }

  res.received = received.load();
  res.duplicates = dups.load();
  res.early = early.load();
  res.complete = consume ? res.received == w.messages : res.sent == w.messages;
  std::vector<int64_t> all;
  for (auto& v : lateness) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  res.p50_ms = Pct(all, 0.5);
  res.p99_ms = Pct(all, 0.99);
  res.p999_ms = Pct(all, 0.999);
  res.max_ms = all.empty() ? 0 : all.back() / 1000.0;
  if (consume && res.received > 0) {
    int64_t span_start = consume_after ? consume_start : std::max(first_deliver.load(), consume_start);
    double span_s = (last_recv.load() - span_start) / 1000.0;
    res.consume_rate = span_s > 0 ? res.received / span_s : 0;
    if (!consume_after) {
      const double due_span_s = (last_deliver.load() - first_deliver.load()) / 1000.0;
      if (due_span_s > 0) res.due_rate = res.received / due_span_s;
      res.drain_lag_ms = last_recv.load() - last_deliver.load();
    }
  }
  if ((w.delay == DelayKind::kHot || w.delay == DelayKind::kSpread) && res.received > 0) {
    res.hot_drain_ms = last_recv.load() - hot_start;
  }
  if (poller && poller->released_ms() >= 0) {
    // The last release lies between the poll before and the first poll that saw every message.
    res.hot_released_ms = poller->released_ms();
    res.hot_released_lo_ms = poller->poll_before_ms();
    // Tighter when every message went through the timer (all sent before the hot second began)
    // and the window's histogram holds them all: the last release is no earlier than the last
    // deliver time and no later than it plus the window's largest release lateness.
    if (enqueue_end.load() < hot_start && res.released >= static_cast<int64_t>(w.messages)) {
      const int64_t last = last_deliver.load() - hot_start;
      res.hot_released_ms = std::min(res.hot_released_ms, last + res.release_max_ms);
      res.hot_released_lo_ms = std::max(res.hot_released_lo_ms, last);
    }
    // And no later than the consumers' last receive, once they received every message.
    if (res.complete && res.hot_drain_ms >= 0) {
      res.hot_released_ms = std::min(res.hot_released_ms, res.hot_drain_ms);
    }
  }
  if (w.rss_pid > 0 && w.messages > 0) {
    res.anon_bytes_per_msg =
        static_cast<double>(res.rss_anon_kb_end - res.rss_anon_kb_before) * 1024.0 / w.messages;
  }
  return res;
}

}  // namespace tokimq::bench
