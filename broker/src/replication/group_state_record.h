// Group-state records (issue 20 item 1, docs/formats/group-state-record.md): the body of a
// CommitLog record in the system topic kGroupStateTopic that carries one group-state write
// batch of the ConsumerService (its puts and deletes of "group/..." keys, in batch order), so
// that a follower, which copies the CommitLog byte for byte, can replay the leader's consumer
// state (offsets, leases, acks, retries, the receipt-handle secret) into its own RocksDB
// (RocketMQ 5 keeps POP checkpoints in its CommitLog the same way).
//
// Integrity: the CommitLog record's CRC32C covers this body; every group-state value also
// carries its own keyed CRC (docs/formats/group-state.md). Decoding is strict: a body that does
// not parse exactly, or names a key outside "group/", is kDataLoss (a follower stops replaying
// there rather than write something the leader did not).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rocksdb {
class WriteBatch;
}

namespace tokimq::broker {

// The system topic of group-state records (one queue, 0). Refused as a destination and as a
// receive / pull topic by the "tokimq_sys_" rule (Broker::ResolveTopic): never delivered to
// users, never counted in their topics' figures.
inline constexpr char kGroupStateTopic[] = "tokimq_sys_group_state";

// Body format version written today (the first byte).
inline constexpr uint8_t kGroupStateRecordVersion = 1;

// A record of a snapshot (GroupStateLog::AppendSnapshot): record `part` (0-based) of the
// `parts` consecutive group-state records that together hold a leader's whole group state.
// Part 0 is the snapshot begin: the replay deletes every "group/" key and applies the
// snapshot's parts, all in one RocksDB batch, so a snapshot REPLACES a replica's group state.
struct SnapshotPart {
  uint32_t part = 0;
  uint32_t parts = 1;  // >= 1, part < parts
  bool operator==(const SnapshotPart& o) const { return part == o.part && parts == o.parts; }
};

// The body of `batch`: u8 version, u32 count, then per operation u8 op (1 put, 2 delete), u32
// key length, key, and for a put u32 value length, value (little-endian). With `snapshot`,
// the first operation is op 3 (u32 part, u32 parts) and count includes it; a snapshot part may
// hold no other operation (an empty group state). kInvalidArgument when the batch holds
// anything but puts and deletes of the default column family, a key outside "group/", no
// operation at all, or a snapshot part with part >= parts.
absl::StatusOr<std::string> EncodeGroupStateRecord(
    const rocksdb::WriteBatch& batch, std::optional<SnapshotPart> snapshot = std::nullopt);

// Adds the operations of `body` to `out`, in order; `snapshot` (when not null) receives the
// record's snapshot part, std::nullopt for an ordinary record. kDataLoss: bad version,
// truncated or trailing bytes, unknown op, zero count, a key outside "group/", op 3 anywhere
// but first or with part >= parts. Nothing is added (and `snapshot` not set) on error.
absl::Status DecodeGroupStateRecord(std::string_view body, rocksdb::WriteBatch* out,
                                    std::optional<SnapshotPart>* snapshot = nullptr);

}  // namespace tokimq::broker
