// The ordering header as message properties: how a producer stamps a message for the planner
// and how a consumer reads it back without decoding the body.
//
//   ORD_KEY   decimal u64, the key hash (e.g. "42"; HashOrderingKey for string keys)
//   ORD_TAG   decimal u16, the event type tag (e.g. "2")
//   ORD_MODE  one of RELAXED | ACQUIRE | RELEASE | ACQ_REL (upper case, exact)
//
// Strict parsing: no sign, no whitespace, no leading "+", no hex; values out of range are errors.
// Stateless functions; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/ordering/plan.h"

namespace tokimq::ordering {

inline constexpr char kKeyProperty[] = "ORD_KEY";
inline constexpr char kTagProperty[] = "ORD_TAG";
inline constexpr char kModeProperty[] = "ORD_MODE";

using Properties = std::map<std::string, std::string>;

// Stable 64-bit hash of a business key (FNV-1a 64). Same value on every host and build, so a
// producer in one process and a consumer in another agree on the key.
uint64_t HashOrderingKey(std::string_view business_key);

// "RELAXED", "ACQUIRE", "RELEASE", "ACQ_REL".
std::string_view OrderingName(EventAtomicOrdering ordering);
// Inverse of OrderingName; InvalidArgument for anything else.
absl::StatusOr<EventAtomicOrdering> ParseOrdering(std::string_view name);

// Sets ORD_KEY, ORD_TAG and ORD_MODE in `*properties`, replacing earlier values; other
// properties are untouched.
void EncodeOrderingProperties(const PlanRecord& header, Properties* properties);

// True if any of the three properties is present.
bool HasOrderingProperties(const Properties& properties);

// Reads the three properties back.
// Errors: NotFound if none of them is present (the message does not use the planner);
// InvalidArgument naming the property if one is missing or its value is malformed / out of range.
absl::StatusOr<PlanRecord> DecodeOrderingProperties(const Properties& properties);

}  // namespace tokimq::ordering
