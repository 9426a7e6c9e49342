// Property keys: the names of every message property the broker itself reads or writes, in
// one place. Values are decimal strings unless said otherwise. Following RocketMQ, the timer
// topic keeps the real destination in properties while the message waits. Stored in CommitLog
// records (docs/formats/commitlog.md), so a key is never renamed.
//
// Users may set any other property; the ones the timer store acts on are refused at send
// (TIMER_DELETE_OF, TIMER_SRC_OFFSET; docs/protocol.md "Send"), MSG_GROUP is set from the
// message group. The RocketMQ endpoint's own keys ("__RMQ_...") are in rocketmq/src/convert.h.
#pragma once

namespace tokimq::prop {

// Set at send.
inline constexpr char kKeys[] = "KEYS";               // business key(s), space separated
inline constexpr char kTag[] = "TAGS";                // tag used by tag filters
inline constexpr char kMessageId[] = "UNIQ_KEY";      // message id given at send
inline constexpr char kMessageGroup[] = "MSG_GROUP";  // FIFO message group

// Timer path (timerstore).
inline constexpr char kRealTopic[] = "REAL_TOPIC";        // real topic of a timer message
inline constexpr char kRealQueueId[] = "REAL_QID";        // real queue id of a timer message
inline constexpr char kDeliverMs[] = "TIMER_DELIVER_MS";  // absolute deliver time (ms)
inline constexpr char kTimerEnqueueMs[] = "TIMER_ENQUEUE_MS";  // when the TimerLog unit was written
inline constexpr char kTimerDequeueMs[] = "TIMER_DEQUEUE_MS";  // when it was moved to the real topic
inline constexpr char kTimerUnitPos[] = "TIMER_UNIT_POS";      // TimerLog position it came from
inline constexpr char kTimerRollCount[] = "TIMER_ROLL_TIMES";  // how many times it rolled
// A recall's delete marker in the timer topic: the recalled record's physical offset.
inline constexpr char kTimerDeleteOf[] = "TIMER_DELETE_OF";
// A delivered copy: physical offset of the timer-topic record it came from (the key recovery
// uses to skip moves that already happened).
inline constexpr char kTimerSourceOffset[] = "TIMER_SRC_OFFSET";
// A copy that retention wrote of a pending timer message (docs/timerstore.md "Retention
// moves", docs/formats/timermoves.md): the physical offset of the record it was copied from,
// the move (epoch) that wrote it, and the physical offset of the message's first timer-topic
// record (what its recall handle names; kept over repeated moves).
inline constexpr char kTimerMovedFrom[] = "TIMER_MOVED_FROM";
inline constexpr char kTimerMoveEpoch[] = "TIMER_MOVE_EPOCH";
inline constexpr char kTimerOriginOffset[] = "TIMER_ORIGIN_OFFSET";

// Retry and dead-letter copies (broker/src/consumer/retry_copy.h).
inline constexpr char kDeliveryAttempt[] = "DELIVERY_ATTEMPT";
inline constexpr char kOriginalTopic[] = "ORIGIN_TOPIC";  // topic a DLQ / retry message came from
// Store time (ms) of the first copy, kept by every later copy: a group's TTL counts from it.
inline constexpr char kFirstStoreMs[] = "FIRST_STORE_MS";

// Transactions (broker/src/transaction/, docs/transactions.md, docs/formats/transaction-op.md).
inline constexpr char kTransactionId[] = "TX_ID";         // on halves, commit copies, op records
inline constexpr char kTxDeliverMs[] = "TX_DELIVER_MS";   // half: deliver time applied at commit
inline constexpr char kTxImmunityMs[] = "TX_IMMUNITY_MS"; // half: check immunity (ms)
// Commit copy (and unresolved copy, op record): physical offset of the half it came from; the
// key recovery uses so a crash never commits a half twice. Refused at send.
inline constexpr char kTxHalfOffset[] = "TX_HALF_OFFSET";
inline constexpr char kTxOp[] = "TX_OP";          // op record: "COMMIT", "ROLLBACK", "UNRESOLVED"
inline constexpr char kTxSource[] = "TX_SOURCE";  // op record: "client", "check", "recovery", "max_checks"

// Records parked in the poison topic (docs/operations.md "Poison messages"): why, the
// destination they were meant for, its queue, and which path parked them ("timer", "retry",
// "dlq").
inline constexpr char kPoisonReason[] = "POISON_REASON";
inline constexpr char kPoisonTopic[] = "POISON_TOPIC";
inline constexpr char kPoisonQueueId[] = "POISON_QID";
inline constexpr char kPoisonSource[] = "POISON_SOURCE";

}  // namespace tokimq::prop
