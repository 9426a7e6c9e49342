// The rewrite of a scheduled message for the timer topic (DESIGN.md "The path of one delayed
// message", step 2; RocketMQ 5 keeps the real destination in properties the same way).
//
// Pure function of its arguments; thread-safe.
#pragma once

#include <cstdint>

#include "commitlog/message.h"

namespace tokimq {

// Sets TIMER_DELIVER_MS = deliver_ms. When deliver_ms > now also: REAL_TOPIC = msg->topic,
// REAL_QID = msg->queue_id, TIMER_DELETE_OF removed (only Recall writes delete markers), and
// the destination becomes the timer topic, queue 0. Returns true when the message goes straight
// to its real topic (deliver_ms <= now; only TIMER_DELIVER_MS is added then).
//
// Works on msg->properties, or on msg->encoded_properties when that is set (the broker's send
// path: record::EditProperties, one pass over the section, no map). Both give the same record
// bytes for the same properties (docs/formats/commitlog.md; tests/timerstore/
// schedule_rewrite_test.cc holds a golden record). An encoded section EditProperties cannot
// edit (keys out of order: not written by our encoder) is decoded into msg->properties and
// rewritten there, which gives the same result.
bool RewriteForSchedule(Message* msg, int64_t deliver_ms, int64_t now);

}  // namespace tokimq
