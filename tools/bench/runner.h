// Runs one workload against one Driver and measures it (see main.cc for the flags).
// Thread-safety: Run is called once, from the main thread; it starts and joins its own threads.
#pragma once

#include <cstdint>
#include <string>

#include "drivers.h"

namespace tokimq::bench {

// kSpread: message seq is due at the spread second's start + (seq % 1000) ms: one message per
// millisecond of one second (workload g, issue 21 item 5).
enum class DelayKind { kUniform, kHot, kFixed, kNow, kSpread };

struct Workload {
  std::string mode = "e2e";  // e2e | enqueue | lease
  uint64_t messages = 100'000;
  size_t body_size = 100;
  DelayKind delay = DelayKind::kUniform;
  int64_t delay_lo_ms = 1000, delay_hi_ms = 10'000;  // uniform; fixed uses lo
  int64_t hot_lead_ms = 20'000;  // hot / spread: the second starts >= this after start
  double rate = 0;                // sends per second over all producers; 0: as fast as possible
  int producers = 2;
  int consumers = 4;
  int batch = 128;
  int receive_batch = 32;
  // true: a consumer acks its last batch with its next receive (ConsumerSession::AckAndReceive,
  // one round trip per batch where the system allows); false: Ack, then Receive.
  bool ack_with_receive = true;
  int64_t max_run_ms = 600'000;
  int rss_pid = 0;  // broker process to sample (/proc/<pid>/status), 0: none
};

struct Result {
  uint64_t sent = 0, received = 0, duplicates = 0, early = 0, errors = 0;
  double enqueue_s = 0, enqueue_rate = 0;
  double consume_rate = 0;       // lease: received / consume time; e2e: received / delivery span
  // e2e: how fast messages fell due — received / (last deliver time - first deliver time); with
  // consume_rate's span starting at the first deliver time too, consume_rate keeps up with it
  // when drain_lag_ms is small. -1: not measured (lease, or no span).
  double due_rate = -1;
  int64_t drain_lag_ms = -1;     // e2e: last receive - last deliver time (the consumers' finish)
  double p50_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;  // lateness
  int64_t hot_drain_ms = -1;     // hot, spread: last receive - start of the (hot) second
  // Broker-side release (tokimq, e2e with delays; -1: not measured): the broker timer's release
  // lateness (put into the topic - deliver time) over this run, from the difference of its
  // histogram before and after the run. Bucket upper bounds (within 6.25 %).
  int64_t release_p50_ms = -1, release_p99_ms = -1, release_max_ms = -1;
  int64_t released = -1;           // releases the timer recorded in the window (histogram count)
  int64_t released_to_topic = -1;  // messages put into the run's topic in the window
  // hot: when the last message of the hot second was released, ms after the second began, as
  // bounds [hot_released_lo_ms, hot_released_ms]: the topic's message count polled every
  // kReleasePollMs (the first poll that saw them all and the one before), narrowed by the last
  // deliver time (+ release_max_ms) when every message went through the timer, and by the
  // consumers' last receive (hot_drain_ms) when they received them all.
  int64_t hot_released_ms = -1, hot_released_lo_ms = -1;
  std::string release_error;  // why release figures are missing, when they were attempted
  int64_t rss_anon_kb_before = 0, rss_anon_kb_max = 0, rss_file_kb_max = 0, rss_anon_kb_end = 0;
  double anon_bytes_per_msg = -1;  // enqueue with --pid: (anon after - anon before) / messages
  // The system's own count of its log fsyncs during the producers' run (Driver::LogSyncs;
  // -1: not counted), and that per acknowledged message (sent).
  int64_t log_syncs = -1;
  double syncs_per_msg = -1;
  bool complete = false;
  std::string first_error;
};

// How often the hot workload polls the broker's topic count for hot_released_ms.
inline constexpr int64_t kReleasePollMs = 50;

Result Run(Driver* driver, const Workload& w);

}  // namespace tokimq::bench
