// Per-key ordering planner: turns the ordering headers of one polled batch into a plan of
// keys -> segments -> runs (model and worked example: docs/ordering.md, from the ordering seed).
//
// The planner reads headers only (key hash, type tag, declared ordering); it never sees message
// bodies. Plan::New is a pure function: no I/O, no clock, no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace tokimq::ordering {

// Application-defined event type (e.g. Opened = 1, Deposited = 2). Strong u16 so a tag is never
// confused with a key or an index: write EventTypeTag{2}, read with static_cast<uint16_t>.
enum class EventTypeTag : uint16_t {};

// What one event asks of the events of other types with the same key. Named after C++ memory
// orders; the "memory" is one key's event sequence. Enumerator names follow the issue text
// (Relaxed | Acquire | Release | AcqRel) rather than kCamelCase: external code compiles against
// them. Values travel as names in message properties (properties.h), never as these integers.
enum class EventAtomicOrdering : uint8_t {
  Relaxed = 0,  // may be reordered against events of other types of the same key
  Acquire = 1,  // "something starts here": everything after it waits for it
  Release = 2,  // "something ends here": it waits for everything before it
  AcqRel = 3,   // full barrier: nothing passes it in either direction
};

// The planner's view of one message: its ordering header. Index i of the span given to Plan::New
// is record i of the batch (the batch's log order).
struct PlanRecord {
  uint64_t key;  // hash of the ordering key (account id, order id...); see HashOrderingKey
  EventTypeTag tag;
  EventAtomicOrdering ordering;
};

// Handle of one segment inside one Plan. Valid only with the Plan that produced it; values are
// dense (0 .. segment_count()-1) in key order, then segment order.
struct SegmentId {
  uint32_t value;
  friend bool operator==(SegmentId, SegmentId) = default;
};

// Handle of one run inside one Plan. Valid only with the Plan that produced it; values are dense
// (0 .. run_count()-1) in key order, segment order, then head, body runs, tail.
struct RunId {
  uint32_t value;
  friend bool operator==(RunId, RunId) = default;
};

// The plan for one batch.
//
//   keys():        independent keys, in order of first appearance in the batch;
//   segments(key): that key's segments, to be run strictly one after another;
//   per segment:   optional head run, then body runs (concurrently, listed in order of their
//                  type's first appearance in the segment), then optional tail run;
//   records(run):  all events of one key and one type in one segment, as indexes into the batch,
//                  ascending (log order).
//
// Every batch index is in exactly one run. Rules (walking a key's events in log order):
//   Acquire / AcqRel  closes the current segment (if it holds anything) and starts a new one;
//                     the event's type is the new segment's head.
//   Relaxed           joins the run of its type in the current segment.
//   Release           joins the run of its type, that run becomes the tail, the segment closes.
//                     If the type is the current head and the segment holds other types, the
//                     Release event instead closes the current segment and forms a segment of its
//                     own (a lone tail run). If the head type is the only type, the Release joins
//                     the head run (reported as head(), tail() empty) and the segment closes.
//
// Immutable after New(); every accessor is const and safe from any number of threads. Passing a
// SegmentId / RunId from another Plan, or out of range, is a programming error (asserts).
class Plan {
 public:
  static Plan New(std::span<const PlanRecord> records);

  Plan() = default;

  std::span<const uint64_t> keys() const { return keys_; }
  // Empty if `key` is not in the batch.
  std::span<const SegmentId> segments(uint64_t key) const;
  std::optional<RunId> head(SegmentId segment) const;
  std::span<const RunId> body(SegmentId segment) const;
  std::optional<RunId> tail(SegmentId segment) const;
  std::span<const size_t> records(RunId run) const;

  // Key and type shared by every record of `run`.
  uint64_t key(RunId run) const;
  EventTypeTag tag(RunId run) const;

  size_t record_count() const { return record_count_; }
  size_t segment_count() const { return segments_.size(); }
  size_t run_count() const { return runs_.size(); }

  // e.g. "key 7: seg{body[2]}; key 42: seg{head[0] body[1,4][3] tail[5]} seg{...}".
  std::string DebugString() const;

 private:
  friend class PlanBuilder;

  static constexpr uint32_t kNoRun = UINT32_MAX;

  struct SegmentData {
    uint32_t head = kNoRun;
    uint32_t body_begin = 0;  // into body_runs_
    uint32_t body_end = 0;
    uint32_t tail = kNoRun;
  };
  struct RunData {
    uint64_t key = 0;
    EventTypeTag tag{};
    uint32_t begin = 0;  // into run_records_
    uint32_t end = 0;
  };
  struct KeySegments {
    uint32_t begin = 0;  // into segment_ids_
    uint32_t end = 0;
  };

  size_t record_count_ = 0;
  std::vector<uint64_t> keys_;
  absl::flat_hash_map<uint64_t, KeySegments> key_segments_;
  std::vector<SegmentId> segment_ids_;  // segment_ids_[i] == SegmentId{i}
  std::vector<SegmentData> segments_;
  std::vector<RunId> body_runs_;
  std::vector<RunData> runs_;
  std::vector<size_t> run_records_;
};

}  // namespace tokimq::ordering
