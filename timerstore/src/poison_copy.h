// PoisonCopy: the record the dequeue service parks in kPoisonTopic (common/names.h) for a due
// unit it cannot deliver: a destination the name rule refuses, a topic the broker no longer has
// (TimerStoreOptions::check_destination), a copy the MessageStore refuses with
// kInvalidArgument, or a record that does not decode. Private to timerstore (the dequeue
// service and its tests). docs/operations.md "Poison messages".
//
// A parked record keeps the body and properties of what would have been delivered and adds
// POISON_REASON (text), POISON_TOPIC / POISON_QID (the destination, when known) and
// POISON_SOURCE = "timer". It always carries TIMER_SRC_OFFSET (the timer-topic record's
// CommitLog offset) and TIMER_UNIT_POS, exactly as a delivered copy does, so recovery's
// CommitLog scan counts a parked unit as moved and never parks or delivers it again.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "commitlog/message.h"
#include "commitlog/record.h"
#include "timerstore/fine_scheduler.h"

namespace tokimq {

// `copy` (a DeliveredCopy: destination in topic / queue_id, properties encoded or in a map)
// turned into its parked record.
Message PoisonFromCopy(Message copy, std::string_view reason);

// The timer-topic record `rec` of unit `su` (its TIMER_DELIVER_MS is the unit's) that
// DeliveredCopy cannot turn into a copy (REAL_TOPIC or REAL_QID missing or bad): its body and
// every stored property, plus the timer delivery properties of `su` and the poison properties.
// (Not in the timer topic at all: the stub of PoisonStub.)
Message PoisonFromRecord(const record::RecordView& rec, const ScheduledUnit& su, int64_t now,
                         std::string_view reason);

// No usable record (it does not decode): an empty body and the unit's facts (TIMER_DELIVER_MS,
// TIMER_SRC_OFFSET, TIMER_UNIT_POS, TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS) with the reason.
Message PoisonStub(const ScheduledUnit& su, int64_t now, std::string_view reason);

// `parked` without its body (for a parked record the store still refuses, e.g. too large once
// the poison properties are added); `why` is appended to POISON_REASON.
Message WithoutBody(Message parked, std::string_view why);

}  // namespace tokimq
