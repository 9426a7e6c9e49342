// TimerStore: delayed delivery on top of the MessageStore, after RocketMQ 5's timer store.
//
// A delayed message is first written to the system timer topic (kTimerTopic) with its real
// topic, real queue id and deliver time kept as properties (prop::kRealTopic, kRealQueueId,
// kDeliverMs). Enqueue services read the timer topic's ConsumeQueue and link each message into
// the TimerLog and the TimerWheel; dequeue services walk due slots, load the messages and put
// each into its real topic at its own millisecond (never before clock.NowMs() >= deliver time).
// See docs/architecture.md and docs/formats/timerlog.md, timerwheel.md, timercheckpoint.md.
//
// Threads: Schedule and Recall may be called from any thread. Start() runs the services on
// their own threads; tests instead call RunUntilIdle() on a ManualClock and never sleep.
// Durability: Schedule returns once the timer-topic record is durable per the MessageStore's
// flush policy; the TimerLog, wheel and checkpoint are flushed in that order by Checkpoint().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "commitlog/message_store.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/metrics.h"

namespace tokimq {

inline constexpr char kTimerTopic[] = "tokimq_sys_timer";
// Property of a recall's delete marker in the timer topic: the recalled record's physical offset.
inline constexpr const auto& kTimerDeleteOf = prop::kTimerDeleteOf;  // common/property_keys.h
// Undeliverable due messages go to kPoisonTopic (common/names.h), never back into the wheel:
// see TimerStoreOptions::check_destination and docs/timerstore.md "Poison messages".
// Property of a delivered copy: physical offset of the timer-topic record it came from (the key
// recovery uses to skip moves that already happened).
inline constexpr const auto& kTimerSourceOffset = prop::kTimerSourceOffset;
inline constexpr const auto& kTimerMovedFrom = prop::kTimerMovedFrom;
inline constexpr const auto& kTimerMoveEpoch = prop::kTimerMoveEpoch;
inline constexpr const auto& kTimerOriginOffset = prop::kTimerOriginOffset;

struct TimerStoreOptions {
  std::string dir;                                   // timerlog/, timerwheel, checkpoint
  int64_t precision_ms = 1000;                       // tick P; 100 must work
  int64_t window_ms = 7LL * 24 * 3600 * 1000;        // wheel window; slots = window / P
  uint64_t timerlog_segment_size = uint64_t{64} << 20;  // bytes
  int64_t checkpoint_interval_ms = 1000;             // Start() mode only
  // Nice value (Linux, per thread) of the enqueue, dequeue and checkpoint threads started by
  // Start(); 0 leaves them as the process. Negative gives the timer path a larger CPU share
  // than request handling when the machine is saturated, so releases stay on time while
  // consumers fall behind (needs CAP_SYS_NICE or a matching RLIMIT_NICE; without it a warning
  // is logged and the threads keep the process's priority). In [-20, 19].
  int service_nice = 0;
  // SCHED_FIFO priority (Linux, 1-99; 0: off) of the dequeue read and dequeue put threads, the
  // two that release a message at its millisecond, while each uses at most 20 ms of CPU per
  // 100 ms (RealtimeThread, timerstore/src/realtime_budget.h); past that, until the 100 ms are
  // over, they run as ordinary threads at service_nice. Under the ordinary scheduler a sleeping
  // thread woken at the due millisecond waits behind whatever runs on the CPUs (p99 3-4 ms on
  // a loaded 2-core machine; 67-84 µs under SCHED_FIFO). Needs CAP_SYS_NICE or RLIMIT_RTPRIO
  // >= the priority; without it one warning is logged and the threads stay ordinary.
  int service_realtime_priority = 0;
  // Start() mode: a put into the timer topic whose earliest deliver time is at least this far
  // ahead (ms, by the store's clock) does not wake the enqueue thread; the thread finds it at
  // its next poll (it polls every kEnqueuePollMs = 10 ms of real time while idle), so linking
  // it into the wheel waits up to that long. That adds no release latency: a unit linked any
  // time before its deliver time is released at its millisecond (one whose slot was already
  // walked goes to the fine scheduler at once), and 1 s is 100 polls. Puts due sooner (and
  // recalls and retention moves) wake the thread at once, as every put did before (issue 21
  // item 1: the wake per single-message send was about two context switches of the broker's
  // per durable send). 0: every put wakes it.
  int64_t enqueue_wake_horizon_ms = 1000;
  // Asked at delivery, once per destination topic of a put batch, on the dequeue put thread
  // with no timer lock held: OK, or why messages for that topic cannot be delivered (e.g.
  // kNotFound: the topic was deleted); those are parked in kPoisonTopic (common/names.h) with
  // the status as their POISON_REASON. Must not call into the TimerStore. Unset: every
  // destination the name rule accepts is delivered. The broker checks its topic metadata.
  std::function<absl::Status(const std::string& topic)> check_destination;
  // Test hook of the retention mover: called after each step of a move with the step's number
  // (1 move begun, 2 copies written, 3 copies and TimerLog synced, 4 committed); an error
  // stops the move there and is returned by the retention hook, as a crash at that point
  // would (tests then drop the stores). Unset in production.
  std::function<absl::Status(int step)> TEST_move_step;
};

// One message for TimerStore::ScheduleBatch: msg.topic / msg.queue_id = real destination,
// deliver_ms = absolute deliver time (ms since epoch).
struct ScheduleItem {
  Message msg;
  int64_t deliver_ms = 0;
};

struct ScheduleResult {
  PutResult put;              // where the message was written (timer topic, or real topic)
  std::string recall_handle;  // opaque, printable (no spaces)
  bool delivered_now = false; // deliver time <= now: written straight to the real topic
};

// In-process metrics. All values exact; gauges never below zero.
struct TimerMetrics {
  Gauge pending;                 // scheduled, not yet delivered, recalled or dropped
  // Pending by remaining delay (deliver tick start - now): <=5s, 1m, 5m, 15m, 1h, 4h, 8h, 1d,
  // more. Sums to `pending`. Set by RefreshGauges (and at checkpoints): read it after that.
  Gauge pending_by_bucket[9];
  Gauge enqueue_lag;             // timer-topic messages not yet in the TimerLog
  // now - end of the oldest due tick with messages not yet put into their topics; 0 when every
  // due message is delivered. Set by RefreshGauges (and at checkpoints).
  Gauge dequeue_lag_ms;
  Counter delivered;
  Counter rolled;
  Counter recalled;
  Counter dropped;               // units pointing past the CommitLog end after recovery
  // Due units that could not be delivered (bad or deleted destination, refused by the store,
  // record does not decode), parked in kPoisonTopic. Each unit counts once.
  Counter poison_parked;
  Histogram lateness_ms;         // put time - deliver time
  // Puts into the timer topic (counted per Schedule / ScheduleBatch call), recalls and
  // retention moves that asked the enqueue thread to wake at once (enqueue_wake_horizon_ms);
  // the other puts wait for its poll. Counted with or without Start().
  Counter enqueue_wakes;
  // Retention (set by the retention hook, i.e. once per retention pass): pending messages
  // copied to the CommitLog head so their old segment could go, and the bytes of those copies;
  // moves abandoned (a message became due during its move, or a write failed: the copies are
  // never delivered, the next pass moves again).
  Counter moved;
  Counter moved_bytes;
  Counter move_aborts;
  // CommitLog bytes past the retention age kept for pending timer messages at the last pass
  // (what the timer store could not move yet: messages due within two ticks, messages being
  // delivered, records not yet enqueued). 0 when retention is not held back.
  Gauge pinned_bytes;
  // now - store time of the first record of the segment holding the oldest CommitLog record
  // the timer store still needs (0 when none). Set by RefreshGauges. With moves it stays below
  // the retention age plus one retention interval.
  Gauge oldest_pending_segment_age_ms;
  // Follower mode (StartFollowing): units finished because the leader's delivered copy of
  // them was copied into this store's CommitLog, and due units still waiting for that copy
  // (held in memory; released by this store if it is promoted first).
  Counter follower_confirmed;
  Gauge follower_held;
};

// Pending messages by due time (TimerStore::PendingByDueTime), for the web console's "what
// comes due when" chart.
struct DueCounts {
  int64_t now_ms = 0;     // the clock when counted; bucket 0 starts here
  int64_t bucket_ms = 0;  // width of each bucket, ms
  // counts[i]: pending messages whose deliver tick starts in [now + i * bucket_ms,
  // now + (i + 1) * bucket_ms); counts[0] also holds those due or overdue, not yet released.
  std::vector<int64_t> counts;
  int64_t later = 0;  // pending messages due after the last bucket
};

class TimerStore {
 public:
  static absl::StatusOr<std::unique_ptr<TimerStore>> Open(FileSystem* fs, Clock* clock,
                                                          MessageStore* store,
                                                          TimerStoreOptions options);
  virtual ~TimerStore() = default;

  // Schedules `msg` (msg.topic / msg.queue_id = real destination) for `deliver_ms` (ms since
  // epoch). deliver_ms <= now: written straight to the real topic. The caller has already
  // checked the delay against the topic's maximum. Errors: as MessageStore::Put;
  // kInvalidArgument for a destination common/names.h refuses (checked before anything is
  // written, whatever the deliver time).
  virtual absl::StatusOr<ScheduleResult> Schedule(Message msg, int64_t deliver_ms) = 0;

  // Schedules every item as Schedule would (same rewrite, same recall handles, result i answers
  // items[i]), but writes them all with ONE MessageStore::PutBatch: one lock, one contiguous
  // CommitLog write, one durability wait (kSync), in item order. Items with deliver_ms <= now go
  // to their real topic, the others to the timer topic, within that same batch.
  // Errors: as MessageStore::PutBatch. A bad destination or an oversize message fails the whole
  // batch before anything is written. After any error no item is acknowledged; as with Schedule,
  // an item may still have reached the CommitLog (e.g. the write succeeded and the fsync failed)
  // and then it is delivered like any other (at-least-once, never early). Empty batch: OK, empty.
  // The default implementation calls Schedule per item and stops at the first error (items
  // before it stay stored).
  virtual absl::StatusOr<std::vector<ScheduleResult>> ScheduleBatch(
      std::vector<ScheduleItem> items);
  // ScheduleBatch without the durability wait (MessageStore::PutBatchNoWait): under
  // FlushMode::kSync the items may not be durable yet when it returns, and the caller must not
  // acknowledge them before the MessageStore's commit_log()->WhenDurable(end) answers OK, end =
  // DurableEnd of the results' `put`s. The timer services may already see them (as with
  // ScheduleBatch, whose records are visible before they are durable). Errors as ScheduleBatch.
  // The default implementation is ScheduleBatch.
  virtual absl::StatusOr<std::vector<ScheduleResult>> ScheduleBatchNoWait(
      std::vector<ScheduleItem> items) {
    return ScheduleBatch(std::move(items));
  }

  // Recalls a scheduled message. OK: it will never be delivered. kNotFound: no such handle.
  // kFailedPrecondition: already delivered (or already recalled), nothing changed.
  // kInvalidArgument: the handle is malformed.
  virtual absl::Status Recall(std::string_view recall_handle) = 0;

  // Runs every service until none can make progress at the current clock time (manual clock).
  virtual absl::Status RunUntilIdle() = 0;
  // A replica's store that is about to lead (issue 20 item 3, docs/replication.md "Timer moves
  // across a failover"); call once, before Start(). Its CommitLog was written by another
  // leader, whose releases are delivered copies in it (kTimerSourceOffset = the CommitLog offset
  // of the timer-topic record released, the same on every replica). Scans the CommitLog from
  // the oldest record this store still has to deliver (its retention pin: pending units and
  // records not yet enqueued) for those copies, then enqueues the timer topic up to its end and
  // checkpoints, as recovery does: the walk then skips every message the old leader released
  // and delivers the others, none early. The scan reads every record past the pin (about
  // 1-2 M records/s); the checkpoint keeps its start until the moves it found are behind the
  // read tick, so a crash meanwhile scans again. Errors: TimerLog / checkpoint I/O.
  // A store that followed (StartFollowing / RunFollowerUntilIdle) already holds the
  // replicated timer topic in its TimerLog and wheel and knows the old leader's releases up to
  // its follow position: it scans only the CommitLog past that position and enqueues only its
  // enqueue lag (both ~0 on a follower that kept up), then hands the units the old leader had
  // not released (due ones at once) to its own dequeue. See docs/replication.md "The
  // follower's timer store".
  // The default does nothing (a store that never follows another).
  virtual absl::Status AdoptReplicatedLog() { return absl::OkStatus(); }
  // Follower mode (issue 20 item 3, docs/replication.md "The follower's timer store"): runs
  // the enqueue side on threads (timer-topic ConsumeQueue -> TimerLog + wheel, as a leader
  // does), walks due slots without releasing anything, and reads every record its CommitLog
  // copies: a delivered copy (kTimerSourceOffset) finishes the unit of its source, so the
  // wheel, the TimerLog's pending units and the checkpoint's read tick follow the leader's
  // releases. Writes nothing to the CommitLog (a follower's log is a byte copy); writes its
  // own TimerLog, wheel and checkpoint (every checkpoint_interval_ms). Due units whose copy
  // has not been copied yet are held in memory until it is, or until promotion
  // (AdoptReplicatedLog) hands them to the dequeue. Stop() ends it; Start() refuses while it
  // runs. Errors: kFailedPrecondition when the threads already run.
  // The default does nothing.
  virtual absl::Status StartFollowing() { return absl::OkStatus(); }
  // The follower steps of StartFollowing, without threads, until none makes progress at the
  // current clock time (manual clock; tests). Marks the store as following, as StartFollowing.
  virtual absl::Status RunFollowerUntilIdle() { return absl::OkStatus(); }
  // Starts / stops the service threads. Stop flushes and checkpoints.
  virtual absl::Status Start() = 0;
  virtual absl::Status Stop() = 0;
  // Flushes TimerLog, then wheel, then writes the checkpoint.
  virtual absl::Status Checkpoint() = 0;

  virtual TimerMetrics& metrics() = 0;
  // Brings the computed gauges of metrics() (pending_by_bucket, dequeue_lag_ms, enqueue_lag) up
  // to now; call before reading them (the broker's Stats does). Takes the store's state lock
  // for one pass over the pending deliver ticks of the next day (about 86,400 at 1 s
  // precision at most). Any thread.
  virtual void RefreshGauges() {}
  // Pending messages by deliver time: `buckets` buckets of `bucket_ms` from now (DueCounts).
  // Counted by each message's own deliver tick (the per-tick counts behind pending_by_bucket,
  // seeded at recovery from the wheel's slot counts), so a message beyond the wheel window
  // counts at its deliver time, not at the slot it is parked in. Sums (with `later`) to the
  // `pending` gauge. Read-only; takes the state lock for one pass over the pending ticks up to
  // the last bucket's end. Any thread. The default (a store without per-tick counts): every
  // count 0. No errors: bucket_ms <= 0 or buckets <= 0 gives no buckets.
  virtual DueCounts PendingByDueTime(int64_t bucket_ms, int buckets) const {
    DueCounts d;
    d.bucket_ms = bucket_ms;
    if (bucket_ms > 0 && buckets > 0) d.counts.assign(static_cast<size_t>(buckets), 0);
    return d;
  }
};

}  // namespace tokimq
