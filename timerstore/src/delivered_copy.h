// DeliveredCopy: the message the dequeue service puts into a real topic when a timer unit is
// due, built from the timer-topic record the unit points to. Private to timerstore (the dequeue
// service, its unit test and bench/delivered_copy_bench.cc).
//
// The copy's properties are the stored record's, without REAL_TOPIC and REAL_QID, with the
// delivery properties TIMER_ENQUEUE_MS (unit write time), TIMER_DEQUEUE_MS (`now`),
// TIMER_UNIT_POS (TimerLog position), TIMER_SRC_OFFSET (CommitLog offset of the timer-topic
// record; recovery's dedup key) and, for a unit that rolled, TIMER_ROLL_TIMES set (replacing
// stored values of those keys), all values decimal. This follows RocketMQ 5's
// TimerMessageStore.convert / convertMessage, which stamp TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS
// (and TIMER_ROLL_TIMES) and clear the real-topic properties.
//
// Pure functions of their arguments; thread-safe. The returned Message owns its bytes (nothing
// points into `rec`).
#pragma once

#include <cstdint>
#include <optional>

#include "commitlog/message.h"
#include "commitlog/record.h"
#include "timerstore/fine_scheduler.h"

namespace tokimq {

// The copy of timer-topic record `rec` that unit `su` delivers at `now` (ms since epoch):
// topic and queue id from REAL_TOPIC / REAL_QID, born/store time and flags of the record, its
// body, the properties above. std::nullopt when the record is not the one the unit points to
// (not the timer topic, TIMER_DELIVER_MS missing or different from the unit's, REAL_TOPIC or
// an integer REAL_QID missing).
//
// The properties come as Message::encoded_properties, written in one pass over the record's
// property bytes (record::EditProperties, no map). When those bytes are not in our encoder's
// key order (a record this encoder did not write), it returns DeliveredCopyByMap's result
// instead. Either way the CommitLog record the copy encodes to is byte for byte the one
// DeliveredCopyByMap's copy encodes to.
std::optional<Message> DeliveredCopy(const record::RecordView& rec, const ScheduledUnit& su,
                                     int64_t now);

// Same copy with its properties in Message::properties, built through a std::map (the first of
// duplicate stored keys kept, as record::Decode keeps). Accepts any key order. The fallback of
// DeliveredCopy, and the reference its tests and benchmark compare against.
std::optional<Message> DeliveredCopyByMap(const record::RecordView& rec, const ScheduledUnit& su,
                                          int64_t now);

}  // namespace tokimq
