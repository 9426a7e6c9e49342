// TimerStoreImpl: the TimerStore behind the public interface. Private to timerstore/src.
//
// The five services are step functions over the shared state below, each making bounded
// progress and returning how much it did, so RunUntilIdle() can drive them synchronously on a
// ManualClock and Start() can run them on threads:
//   enqueue get  (enqueue_service.cc): timer-topic ConsumeQueue -> enqueue_queue_
//   enqueue put  (enqueue_service.cc): enqueue_queue_ -> TimerLog unit + wheel link
//   dequeue get  (dequeue_walk.cc): due wheel slots (one tick early) -> FineScheduler
//   dequeue read (dequeue_service.cc): units due now -> loaded delivered copies (put_queue_)
//   dequeue put  (dequeue_service.cc): put_queue_ -> real topic (PutBatch)
// Recovery lives in recovery.cc, Schedule and Recall in schedule.cc, Checkpoint in
// checkpointing.cc, the service threads in service_threads.cc, the retention mover (moves
// pending messages out of CommitLog segments retention wants to delete) in retention_mover.cc.
//
// Locking: mu_ guards all state; I/O on the MessageStore happens outside it except where noted.
// Checkpoint() snapshots under mu_ and does its fsyncs outside it (checkpoint_mu_ serialises
// checkpoints); with Start() it runs on its own thread.
// Lock order: move_mu_ (one move at a time) -> checkpoint_mu_ -> mu_; run_mu_ is a leaf
// (WakeEnqueue takes it with no other lock held).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/log_limiter.h"
#include "move_state.h"
#include "pending_by_delay.h"
#include "timerstore/fine_scheduler.h"
#include "timerstore/timer_checkpoint.h"
#include "timerstore/timer_log.h"
#include "timerstore/timer_store.h"
#include "timerstore/timer_wheel.h"

namespace tokimq {

class RealtimeThread;  // realtime_budget.h

class TimerStoreImpl final : public TimerStore {
 public:
  static constexpr size_t kEnqueueQueueCap = 4096;      // messages between enqueue get and put
  static constexpr size_t kPutQueueCap = 4096;          // loaded copies between read and put
  static constexpr int64_t kEnqueuePollMs = 10;         // enqueue thread's idle poll, real time
  static constexpr size_t kMaxLoadedUnits = 2'000'000;  // FineScheduler back-pressure
  static constexpr int kPinBucketShift = 22;            // 4 MiB of CommitLog per pin bucket
  // The pin bucket (pins_ key: an index, not an offset) of a CommitLog offset.
  static int64_t PinBucketOf(PhysicalOffset o) { return o.value() >> kPinBucketShift; }

  TimerStoreImpl(FileSystem* fs, Clock* clock, MessageStore* store, TimerStoreOptions options);
  ~TimerStoreImpl() override;

  absl::Status Recover();  // recovery.cc
  absl::Status AdoptReplicatedLog() override;  // replica_promotion.cc
  absl::Status StartFollowing() override;       // follower.cc
  absl::Status RunFollowerUntilIdle() override;  // follower.cc
  // Loads <dir>/moves; a move begun and neither committed nor abandoned is abandoned.
  absl::Status RecoverMoves();

  absl::StatusOr<ScheduleResult> Schedule(Message msg, int64_t deliver_ms) override;
  absl::StatusOr<std::vector<ScheduleResult>> ScheduleBatch(
      std::vector<ScheduleItem> items) override;
  absl::StatusOr<std::vector<ScheduleResult>> ScheduleBatchNoWait(
      std::vector<ScheduleItem> items) override;
  // ScheduleBatch and ScheduleBatchNoWait: PutBatch or PutBatchNoWait.
  absl::StatusOr<std::vector<ScheduleResult>> ScheduleItems(std::vector<ScheduleItem> items,
                                                            bool wait_durable);
  absl::Status Recall(std::string_view recall_handle) override;
  absl::Status RunUntilIdle() override;
  absl::Status Start() override;
  absl::Status Stop() override;
  absl::Status Checkpoint() override;
  TimerMetrics& metrics() override { return metrics_; }
  void RefreshGauges() override;
  DueCounts PendingByDueTime(int64_t bucket_ms, int buckets) const override;

  // Follower steps (follower.cc; docs/replication.md "The follower's timer store").
  // Reads the CommitLog from follow_scan_pos_ (at most kFollowScanBatch records) and finishes
  // the unit of each delivered copy found, or remembers the copy (copies_seen_).
  absl::StatusOr<size_t> FollowScanStep();
  // Takes the due units off the FineScheduler: finishes those whose copy was seen (or that
  // were recalled), holds the rest (held_) until their copy comes.
  absl::StatusOr<size_t> FollowerSettleStep();

  // Service steps; each returns the number of items it moved (0 = nothing to do now).
  absl::StatusOr<size_t> EnqueueGetStep();
  absl::StatusOr<size_t> EnqueuePutStep();
  absl::StatusOr<size_t> DequeueGetStep();
  absl::StatusOr<size_t> DequeueReadStep();
  absl::StatusOr<size_t> DequeuePutStep();

 private:
  struct InflightTick {
    int64_t outstanding = 0;                 // units loaded but not yet delivered/skipped
    int64_t done_pending = 0;                // pending decrements already applied for this tick
    PhysicalOffset commitlog_start;          // CommitLog end before the first put of this tick
    TimerLogPosition timerlog_start;         // TimerLog end when the walk began
    std::map<int64_t, int64_t> pin_release;  // bucket -> units finished
    // Lowest CommitLog offset of any unit handed to the FineScheduler for this tick (never
    // raised while the tick is in flight): the retention mover moves nothing at or above it.
    PhysicalOffset min_phys = PhysicalOffset(std::numeric_limits<int64_t>::max());
  };
  // What enqueue put needs of one timer-topic record (read by enqueue get without building a
  // Message).
  struct EnqueueItem {
    PhysicalOffset physical_offset = PhysicalOffset::kNone();
    QueueOffset queue_offset = QueueOffset::kNone();
    uint32_t size = 0;         // record bytes
    bool has_deliver = false;  // TIMER_DELIVER_MS present and a valid integer
    bool is_delete = false;    // TIMER_DELETE_OF present and a valid integer (recall marker)
    int64_t deliver_ms = 0;
    PhysicalOffset delete_of = PhysicalOffset::kNone();
    uint32_t topic_hash = 0;  // crc32c of REAL_TOPIC, 0 when absent
    bool is_copy = false;     // TIMER_MOVED_FROM present: a retention copy (already pending)
  };
  struct LoadedCopy {
    ScheduledUnit su;
    Message msg;              // the delivered copy; when `poison` is set, the record to park
    std::string poison;       // non-empty: dequeue read found it undeliverable (the reason)
    uint64_t move_epoch = 0;  // a retention copy: the move that wrote it (0: not a copy)
    // A retention copy: TIMER_ORIGIN_OFFSET (what recalls name); kNone otherwise.
    PhysicalOffset origin = PhysicalOffset::kNone();
  };
  // One pending unit the retention mover found below its end (retention_mover.cc).
  struct MoveCandidate {
    TimerLogPosition pos = TimerLogPosition::kNone();
    TimerUnit unit;
  };

  // Dequeue get's parts (dequeue_walk.cc). Without mu_: reads the chain of `slot` (tick
  // `tick`) from the TimerLog, oldest first, into its roll units and the sorted run of units
  // to deliver (a broken chain is logged and ends the walk). Under mu_: continues the rolls
  // into later slots; hands the run to the FineScheduler (skipping units recalled, delivered
  // before a crash, handed over early or moved by retention) and drops the walk's own count;
  // completes ticks and prunes the dedup and recall sets after a step.
  void ReadSlotChain(int64_t tick, const TimerSlot& slot,
                     std::vector<std::pair<TimerLogPosition, TimerUnit>>* rolls,
                     std::vector<ScheduledUnit>* run) const;
  absl::Status ContinueRollsLocked(
      int64_t tick, const std::vector<std::pair<TimerLogPosition, TimerUnit>>& rolls);
  void HandOverRunLocked(int64_t tick, std::vector<ScheduledUnit> run);
  void FinishWalkStepLocked(size_t progressed);

  // Dequeue read and put's parts (dequeue_service.cc), all called without mu_.
  // Loads the delivered copies of `units` (one batched read) at `now`. A unit whose record is
  // gone (kNotFound / kInvalidArgument: past the CommitLog end after a crash, or deleted) goes
  // to *dropped; one whose read failed otherwise (I/O) to *retry, the first such error in
  // *transient; a record that does not decode, or is no deliverable timer message, gives a
  // LoadedCopy with `poison` set (its parked record in msg).
  std::vector<LoadedCopy> LoadCopies(std::vector<ScheduledUnit> units, int64_t now,
                                     std::vector<ScheduledUnit>* dropped,
                                     std::vector<ScheduledUnit>* retry, absl::Status* transient);
  // Under mu_, after loading: finishes (without delivering) the retention copies whose move
  // never committed, and those whose message was recalled by its original handle.
  void DropUncommittedCopiesLocked(std::vector<LoadedCopy>* loaded);
  // Moves copies whose destination fails the name rule or options_.check_destination (asked
  // once per topic) from *batch to *poison, with the reason set.
  void SplitUndeliverable(std::vector<LoadedCopy>* batch, std::vector<LoadedCopy>* poison);
  // Puts `copies` into their topics: one PutBatch, and after kInvalidArgument (one of them is
  // refused) the batch is loaded again and put one by one, so a refused copy cannot fail its
  // neighbours. Refused copies go to *poison; units hit by any other error (transient: I/O,
  // disk full) to *retry, the error in *transient; units whose record is gone by the second
  // load to *dropped; the rest to *delivered.
  void PutCopies(std::vector<LoadedCopy> copies, std::vector<ScheduledUnit>* delivered,
                 std::vector<LoadedCopy>* poison, std::vector<ScheduledUnit>* dropped,
                 std::vector<ScheduledUnit>* retry, absl::Status* transient);
  // Parks `poison` in kPoisonTopic, one rate-limited log line per message. A parked record the
  // store refuses is parked without its body; refused again, it is dropped (*dropped, logged).
  void ParkCopies(std::vector<LoadedCopy> poison, std::vector<ScheduledUnit>* parked,
                  std::vector<ScheduledUnit>* dropped, std::vector<ScheduledUnit>* retry,
                  absl::Status* transient);
  // After a transient dequeue error (mu_ held): units of `retry` back to the FineScheduler,
  // read and put wait backoff_ms_ (doubled, capped). OK `transient` with `ok_resets` (a put
  // step without error): the backoff resets.
  void BackOffLocked(const absl::Status& transient, const std::vector<ScheduledUnit>& retry,
                     int64_t now, bool ok_resets);
  // After timer-topic puts up to `max_queue_offset`, the earliest of them due at
  // `earliest_deliver_ms`: enqueue lag; wakes the enqueue thread when that is within
  // options_.enqueue_wake_horizon_ms (INT64_MIN: always), else leaves the puts to its poll.
  void NoteTimerPuts(QueueOffset max_queue_offset, int64_t earliest_deliver_ms);
  // Asks the enqueue thread to run its steps now (counted in metrics_.enqueue_wakes); notifies
  // it only when it sleeps and no wake is pending (no futex call per put while it runs).
  void WakeEnqueue();
  // The enqueue thread's idle wait: until WakeEnqueue, Stop or kEnqueuePollMs of real time.
  void WaitForEnqueueWork();

  int64_t ReadTickLocked() const;
  int64_t TickOf(int64_t ms) const;
  InflightTick& InflightLocked(int64_t tick);
  // Appends `u` to the TimerLog and links it (roll/normal decided here); units whose own tick
  // was already walked go straight to the FineScheduler (see handed_early_).
  absl::StatusOr<TimerLogPosition> LinkUnitLocked(TimerUnit u);
  // A unit reached its end (delivered, dropped, deduplicated, recalled).
  void FinishUnitLocked(const ScheduledUnit& su, bool pending_decrement);
  void MaybeCompleteTicksLocked();
  // fine_.Add, waking dequeue read when `su` is due before the time it sleeps until.
  void AddFineLocked(ScheduledUnit su);
  // fine_.AddRun (run sorted by FineScheduler::RunOrder), waking dequeue read likewise.
  void AddRunLocked(std::vector<ScheduledUnit> run);
  // Dequeue read's idle wait (l holds mu_): until the earliest loaded unit is due, an earlier
  // one is loaded, or a 100 ms cap (Stop). Manual clock: Clock::WaitUntilMs with a 1 ms cap.
  void WaitForDueLocked(std::unique_lock<std::mutex>& l);
  // Sets the pending-by-delay, enqueue-lag and dequeue-lag gauges as of `now` (exact: from
  // pending_by_delay_, inflight_ and the wheel).
  void RefreshGaugesLocked(int64_t now);
  // Recovery, after the wheel is complete: pending_by_delay_ from the wheel's slot counts of
  // [read_tick, read_tick + window]. Units then in the wheel count at their slot tick (for a
  // roll unit, its parking slot) until their slot is walked; SettleSeededLocked re-keys them.
  void SeedPendingByDelayLocked(int64_t read_tick);
  // Whether `su` was counted by the seed (linked before it, in a seeded slot).
  bool SeededLocked(const ScheduledUnit& su) const {
    return su.pos < seed_end_pos_ && su.unit.slot_tick >= seed_from_tick_;
  }
  // The walk of a seeded unit's slot: its count moves from the slot tick to its deliver tick
  // (where the rest of the store counts it). `recalled`: the message was recalled; if that was
  // before the seed, the seed already took its count off its deliver tick, and the count left
  // at a different slot tick goes. `stale_roll`: a roll unit whose continuation exists (crash
  // between the two): only the continuation counts.
  void SettleSeededLocked(const ScheduledUnit& su, bool recalled, bool stale_roll);
  PhysicalOffset PinLocked() const;  // PhysicalOffset(INT64_MAX): nothing pinned
  // Retention mover (retention_mover.cc). The retention hook: moves the pending messages whose
  // records lie below `expired_end` to the CommitLog head and raises the frontier, as far as it
  // can now (see docs/timerstore.md "Retention moves").
  absl::Status MoveSurvivors(PhysicalOffset expired_end);
  // Reads the chains of every slot not yet walked; returns the units with a record in
  // [frontier, end) (outside mu_: units are immutable), and how many units it read.
  absl::StatusOr<std::vector<MoveCandidate>> FindCandidates(
      const std::vector<std::pair<int64_t, TimerLogPosition>>& slots, PhysicalOffset end,
      int64_t* read) const;
  // Under mu_: the end the move may reach (below every unit it cannot move now) and the
  // survivors to copy below it; *seen gets every candidate below that end (for the pins).
  // `timer_queue_end`: the timer topic's MaxQueueOffset, read before mu_ was taken.
  PhysicalOffset ChooseSurvivorsLocked(std::vector<MoveCandidate> candidates, PhysicalOffset end,
                                       QueueOffset timer_queue_end,
                                       std::vector<MoveCandidate>* survivors,
                                       std::vector<MoveCandidate>* seen) const;
  // Writes the copies of `survivors` (move `epoch`) to the timer topic; *copied_bytes,
  // *copied count what was written; orphans (copies of an uncommitted move) are not copied.
  absl::Status WriteCopies(const std::vector<MoveCandidate>& survivors, uint64_t epoch,
                           const MoveState& state, int64_t* copied, int64_t* copied_bytes);
  // (tick, last_pos) of every live wheel slot from the next walk tick on, a window ahead.
  std::vector<std::pair<int64_t, TimerLogPosition>> LiveSlotsLocked() const;
  // Under mu_, once move `epoch` (0: nothing copied) wrote its copies and a checkpoint: false
  // (abandoned) when a survivor's slot was walked meanwhile; else stores the committed state
  // with the frontier at `end` and releases the pins of `seen`, and returns true.
  absl::StatusOr<bool> CommitMoveLocked(uint64_t epoch, PhysicalOffset end,
                                        const std::vector<MoveCandidate>& survivors,
                                        const std::vector<MoveCandidate>& seen);
  // Marks `epoch` abandoned (its copies are never delivered) and stores the state.
  absl::Status AbandonMoveLocked(uint64_t epoch);
  // Whether `u` points below the frontier: its message was moved (or its record is gone).
  bool SupersededLocked(const TimerUnit& u) const {
    return u.physical_offset < moves_.frontier;
  }
  // Sets pinned_bytes (unless expired_end is kNone) and oldest_pending_segment_age_ms as of
  // now (reads the CommitLog; call without mu_).
  void RefreshRetentionGauges(PhysicalOffset expired_end);
  absl::Status RelinkForRecovery(TimerLogPosition pos, const TimerUnit& u, int64_t read_tick);
  // Follower mode (follower.cc). A delivered copy at CommitLog offset `at` of the message whose
  // timer-topic record is at `src`: finishes a held unit of `src`, else remembers the copy.
  struct SeenCopy {
    PhysicalOffset at;        // where the copy is in this store's CommitLog
    int64_t deliver_ms = 0;   // TIMER_DELIVER_MS of the copy (0: none)
  };
  void MatchCopyLocked(PhysicalOffset src, SeenCopy copy);
  // Finishes `su` (on a follower) as released by the leader, whose copy is at `at`: the tick's
  // CommitLog scan start covers the copy until the tick completes (a restart finds it again).
  void FinishConfirmedLocked(const ScheduledUnit& su, PhysicalOffset at);
  // Drops remembered copies whose source is below the pin (no pending unit has it any more).
  void PruneCopiesSeenLocked();
  // AdoptReplicatedLog of a store that followed: the follower's lag only.
  absl::Status AdoptAfterFollowing();
  void FollowerLoop();
  // Recovery's steps (recovery.cc), in order: load the checkpoint (or start empty, removing an
  // unaccounted TimerLog and wheel); open the TimerLog and the wheel (rebuilding a torn wheel);
  // replay the TimerLog tail past the checkpoint into the wheel, counters and dedup sets; scan
  // the CommitLog tail for delivered copies; register the pin provider and retention hook.
  struct RecoveryScan {
    TimerCheckpointData ckpt;
    bool had_checkpoint = false;
    int64_t read_tick = 0;
    TimerLogPosition scan_from;  // where the TimerLog replay starts
    TimerLogPosition end;        // TimerLog end
    int64_t pending = 0;         // pending messages, from the checkpoint plus the replay
    int64_t max_tail_tick = -1;  // last slot tick a move or roll before the crash concerns
    int64_t scanned = 0;         // CommitLog records scanned
  };
  absl::Status LoadCheckpointForRecovery(RecoveryScan* r);
  absl::Status OpenTimerLogAndWheel(RecoveryScan* r);
  absl::Status ReplayTimerLogTail(RecoveryScan* r);
  void ScanDeliveredCopies(RecoveryScan* r);
  // The slot tick the unit of delivered copy `m` (of the message at `phys`) was walked in.
  int64_t DeliveredCopySlot(const Message& m, PhysicalOffset phys, const RecoveryScan& r);
  void RegisterWithStore();
  // 0: enqueue get + put; 1: dequeue get (slot walks); 2: dequeue put; 3: dequeue read.
  // A step failing with kResourceExhausted (disk full) is retried with backoff and is not a
  // service failure (Stop() does not report it).
  // `realtime` governs the calling thread's scheduling policy (realtime_budget.h).
  void WorkerLoop(int which, RealtimeThread* realtime);
  // Log once per state change: the first out-of-space error, the first success after it.
  void NoteOutOfSpace(const absl::Status& s, const char* what);
  void NoteWritesSucceed();
  // Sets the calling thread's nice value (TimerStoreOptions::service_nice); logs a failure when
  // `report`.
  static void SetThreadNice(int nice, bool report);
  void CheckpointLoop();

  FileSystem* fs_;
  Clock* clock_;
  MessageStore* store_;
  TimerStoreOptions options_;
  int64_t slots_total_;  // window / precision
  TimerMetrics metrics_;
  PendingByDelay pending_by_delay_;  // guarded by mu_
  // Seed bookkeeping (SeedPendingByDelayLocked); -1 / empty when nothing seeded is left.
  TimerLogPosition seed_end_pos_ = TimerLogPosition::kNone();  // TimerLog end when seeded
  int64_t seed_from_tick_ = 0;                  // first seeded slot tick
  int64_t seed_until_tick_ = -1;                // past the last seeded slot tick
  absl::flat_hash_set<PhysicalOffset> seed_recalled_;  // recalled when seeded

  std::mutex checkpoint_mu_;  // serialises Checkpoint(); taken before mu_
  // The checkpoint file as last written by this process (guarded by checkpoint_mu_): Checkpoint
  // skips the write (a temp file fsync and a directory fsync) when only the read tick moved,
  // by less than kCheckpointReadTickSlackMs (CheckpointUnchanged).
  std::string stored_checkpoint_;  // encoded with the read tick of stored_read_tick_
  int64_t stored_read_tick_ = 0;
  static constexpr int64_t kCheckpointReadTickSlackMs = 60'000;
  mutable std::mutex mu_;
  std::unique_ptr<TimerLog> timerlog_;
  std::unique_ptr<TimerWheel> wheel_;
  FineScheduler fine_;
  std::map<int64_t, InflightTick> inflight_;
  int64_t next_walk_tick_ = 0;
  QueueOffset enqueue_read_offset_;  // next queue offset enqueue get reads
  QueueOffset enqueue_offset_;       // next queue offset not yet in the TimerLog
  QueueOffset timer_max_queue_offset_;
  PhysicalOffset last_enqueued_physical_offset_ = PhysicalOffset::kNone();
  std::map<int64_t, int64_t> pins_;
  absl::flat_hash_map<PhysicalOffset, int64_t> recalled_;  // timer-topic record -> deliver ms
  absl::flat_hash_set<PhysicalOffset> delivered_phys_;  // recovery dedup (CommitLog tail scan)
  absl::flat_hash_set<TimerLogPosition> rolled_from_;  // recovery dedup (roll continuations)
  absl::flat_hash_set<TimerLogPosition> handed_early_;  // in fine_ already: the walk skips them
  int64_t eager_walk_until_ = 0;  // recovery: slots below it are walked now, not one tick early
  // Recovery's dedup window: while dedup_until_tick_ >= 0 (read tick not yet past it), the
  // knowledge in delivered_phys_ / rolled_from_ came from scanning the CommitLog from
  // dedup_commitlog_from_ and the TimerLog from dedup_timerlog_from_, and exists nowhere else.
  // Every checkpoint written meanwhile keeps its scan starts at or below these, so a crash
  // before the window closes finds the same moves again (issue 14 defect 3: a checkpoint of
  // the recovered store used to move the scan start past the copies made before the first
  // crash, and the second recovery moved them again).
  int64_t dedup_until_tick_ = -1;
  PhysicalOffset dedup_commitlog_from_;
  TimerLogPosition dedup_timerlog_from_;
  // Follower mode (follower.cc), guarded by mu_. followed_: the store ran follower steps since
  // it opened (AdoptReplicatedLog then adopts the lag only). follow_scan_pos_: the CommitLog
  // is read for delivered copies below it (recovery's scan reaches the end at open).
  // copies_seen_: delivered copies (source offset -> copy) whose unit was not due here yet;
  // held_: due units whose copy was not seen yet (source offset -> unit).
  static constexpr size_t kFollowScanBatch = 4096;
  bool followed_ = false;
  PhysicalOffset follow_scan_pos_ = PhysicalOffset(0);
  absl::flat_hash_map<PhysicalOffset, SeenCopy> copies_seen_;
  std::multimap<PhysicalOffset, ScheduledUnit> held_;
  size_t copies_prune_at_ = 1024;
  LogLimiter follow_log_{1, 10'000};
  std::deque<EnqueueItem> enqueue_queue_;
  std::deque<LoadedCopy> put_queue_;
  // After a transient read or put error (I/O, disk full) the units go back to the
  // FineScheduler and dequeue read and put wait until retry_at_ms_: backoff doubling from
  // kMinBackoffMs to kMaxBackoffMs, reset by a step without one. Guarded by mu_.
  static constexpr int64_t kMinBackoffMs = 10;
  static constexpr int64_t kMaxBackoffMs = 1000;
  int64_t retry_at_ms_ = INT64_MIN;
  int64_t backoff_ms_ = 0;
  LogLimiter poison_log_{10, 1000};  // one line per parked message, at most 10 a second
  LogLimiter drop_log_{10, 1000};    // one line per dropped unit, at most 10 a second
  // With Start(): signalled (with mu_) when put_queue_ gains copies or room.
  std::condition_variable put_cv_;
  // With Start() on a system clock: dequeue read sleeps on read_cv_ (with mu_) until
  // read_wake_ms_, the earliest loaded deliver time when it went to sleep; AddFineLocked
  // signals it when a unit due before that is loaded. INT64_MIN while it is not sleeping.
  std::condition_variable read_cv_;
  int64_t read_wake_ms_ = INT64_MIN;

  struct PinCell {
    std::mutex mu;
    TimerStoreImpl* owner = nullptr;
  };
  std::shared_ptr<PinCell> pin_cell_;
  MessageStore::PinId pin_id_ = 0;
  MessageStore::PinId hook_id_ = 0;
  // Retention moves: the persisted state (frontier, epochs; guarded by mu_, written to
  // <dir>/moves under mu_ by the mover and recovery only) and the mover's own lock.
  MoveState moves_;
  std::mutex move_mu_;
  std::atomic<int64_t> last_expired_end_{-1};  // for RefreshRetentionGauges

  // Start()/Stop().
  std::mutex run_mu_;
  std::condition_variable run_cv_;
  // Written under run_mu_ (the condition-variable waits check it as their predicate), read
  // without it at the top of each service loop.
  std::atomic<bool> stopping_{false};
  // The enqueue thread's wake-ups (WakeEnqueue / WaitForEnqueueWork), guarded by run_mu_:
  // enqueue_kick_ says work was put since the thread last looked, enqueue_sleeping_ that it
  // waits on enqueue_cv_ (only then is a notify needed).
  std::condition_variable enqueue_cv_;
  bool enqueue_kick_ = false;
  bool enqueue_sleeping_ = false;
  std::vector<std::thread> threads_;
  absl::Status bg_status_;
  std::atomic<bool> out_of_space_{false};  // see NoteOutOfSpace
};

}  // namespace tokimq
