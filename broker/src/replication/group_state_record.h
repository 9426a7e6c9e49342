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

// The body of `batch`: u8 version, u32 count, then per operation u8 op (1 put, 2 delete), u32
// key length, key, and for a put u32 value length, value (little-endian). kInvalidArgument
// when the batch holds anything but puts and deletes of the default column family, a key
// outside "group/", or no operation.
absl::StatusOr<std::string> EncodeGroupStateRecord(const rocksdb::WriteBatch& batch);

// Adds the operations of `body` to `out`, in order. kDataLoss: bad version, truncated or
// trailing bytes, unknown op, zero count, a key outside "group/". Nothing is added on error.
absl::Status DecodeGroupStateRecord(std::string_view body, rocksdb::WriteBatch* out);

}  // namespace tokimq::broker
