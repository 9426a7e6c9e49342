// Group state records: the RocksDB keys and values ConsumerService keeps under "group/...".
// Grammar and worked example: docs/formats/group-state.md (the receipt handle, which names
// these keys' queues, is in consumer/receipt_handle.h).
//
// Every value ends with a CRC32C computed over the key bytes followed by the value bytes before
// the CRC, so a torn or misplaced value is detected on recovery. All integers little-endian.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "broker/consumer_service.h"
#include "common/names.h"

namespace tokimq::consumer {

// One consume progress: `group` reads (`read_topic`, `queue_id`) on behalf of receives for
// `topic`. read_topic == topic for the topic's own queues; read_topic == "%RETRY%<group>" for
// the retry view (which only hands out retry copies whose ORIGIN_TOPIC is `topic`).
struct QueueKey {
  std::string group;
  std::string topic;
  std::string read_topic;
  int32_t queue_id = 0;

  auto Tie() const { return std::tie(group, topic, read_topic, queue_id); }
  bool operator<(const QueueKey& o) const { return Tie() < o.Tie(); }
  bool operator==(const QueueKey& o) const { return Tie() == o.Tie(); }
};

// A live lease on one queue offset. epoch starts at 1 and grows by one per renewal; a receipt
// handle carrying another epoch is stale.
struct LeaseRecord {
  uint32_t epoch = 1;
  uint32_t attempt = 1;             // delivery attempt of this delivery (1 = first)
  int64_t invisible_until_ms = 0;   // lease end (ms since epoch)
  int64_t received_ms = 0;          // when this delivery was handed out
  // FIFO queues only (docs/ordering.md "FIFO topics"). A parked entry is held by no consumer:
  // it waits for its message group (never delivered: epoch 0, invisible_until_ms 0; returned
  // behind an earlier message of its run: epoch > 0, invisible_until_ms 0) or, after
  // an expired or nacked lease, for its redelivery time (invisible_until_ms; attempt already
  // counts the next delivery). No receipt handle names a parked entry's epoch.
  bool parked = false;
  std::string msg_group;  // FIFO queues: the message's group ("" = ungrouped)
  // In memory only: the lease block (first queue offset of the record) that stores this lease,
  // or kLegacyLeaseKey for a lease stored under its own lease key by an older broker.
  int64_t block = -1;
};
inline constexpr int64_t kLegacyLeaseKey = -1;
// Leases per lease-block record at most (a Receive writes ceil(n / 64) blocks per queue).
inline constexpr size_t kMaxBlockLeases = 64;
using BlockLease = std::pair<int64_t, LeaseRecord>;  // queue offset, lease

inline std::string RetryTopic(const std::string& group) { return kRetryTopicPrefix + group; }
inline std::string DlqTopic(const std::string& group) { return kDlqTopicPrefix + group; }

// Names the key and receipt formats accept for groups and topics: 1..255 bytes, no '/', no
// control bytes; groups additionally may not start with '%' (reserved for "%sys"). Looser than
// the name rule requests are held to (common/names.h), so group state written before that rule
// still loads; entry points check common/names.h, not these.
bool ValidGroupName(std::string_view group);
bool ValidTopicName(std::string_view topic);

// --- keys ---
inline constexpr char kKeyPrefix[] = "group/";
inline constexpr char kLeaseTopicOffsetKey[] = "group/%sys/lease_topic_offset";
inline constexpr char kHandleSecretKey[] = "group/%sys/handle_secret";
std::string ProgressKey(const QueueKey& k);
std::string LeaseKey(const QueueKey& k, int64_t queue_offset);  // version 1 (read, deleted)
// The live leases of one Receive in one queue; `first_offset` is the block's first offset.
std::string LeaseBlockKey(const QueueKey& k, int64_t first_offset);
std::string PolicyKey(const std::string& group);
// The offset `group` committed for (`topic`, `queue_id`) with UpdateOffset (offset-based
// consumption, docs/protocol.md); apart from the lease-based progress. Value: an offset value.
std::string CommittedOffsetKey(std::string_view group, std::string_view topic, int32_t queue_id);

// A parsed "group/..." key.
struct ParsedKey {
  enum Kind {
    kProgress, kLease, kPolicy, kLeaseTopicOffset, kHandleSecret, kLeaseBlock, kCommittedOffset
  } kind;
  // kProgress, kLease, kLeaseBlock (group only for kPolicy; group, topic and queue id for
  // kCommittedOffset)
  QueueKey queue;
  int64_t queue_offset = 0;  // kLease; kLeaseBlock: the block's first offset
};
std::optional<ParsedKey> ParseKey(std::string_view key);

// --- values (each: u8 version, fields, u32 crc) ---
std::string EncodeOffsetValue(std::string_view key, int64_t offset);
absl::StatusOr<int64_t> DecodeOffsetValue(std::string_view key, std::string_view value);
std::string EncodeLeaseValue(std::string_view key, const LeaseRecord& lease);
absl::StatusOr<LeaseRecord> DecodeLeaseValue(std::string_view key, std::string_view value);
// Lease block: u8 version, u32 n (1..kMaxBlockLeases), n x {i64 offset, u32 epoch, u32 attempt,
// i64 invisible_until_ms, i64 received_ms}, u32 crc. Offsets strictly increasing, all >= the
// block's first offset (from the key). Version 2 (written only when an entry is parked or has
// a message group) appends to each entry u8 flags (bit 0: parked), u16 group length, group.
// Decoding accepts both versions.
std::string EncodeLeaseBlockValue(std::string_view key, const std::vector<BlockLease>& leases);
absl::StatusOr<std::vector<BlockLease>> DecodeLeaseBlockValue(std::string_view key,
                                                              std::string_view value);
std::string EncodePolicyValue(std::string_view key, const GroupPolicy& policy);
absl::StatusOr<GroupPolicy> DecodePolicyValue(std::string_view key, std::string_view value);
std::string EncodeSecretValue(std::string_view key, uint64_t secret);
absl::StatusOr<uint64_t> DecodeSecretValue(std::string_view key, std::string_view value);

}  // namespace tokimq::consumer
