#include "consumer/group_state.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/names.h"
#include "common/parse_int.h"

namespace tokimq::consumer {
namespace {

constexpr uint8_t kValueVersion = 1;
// Lease blocks holding FIFO entries (parked flag and message group per entry).
constexpr uint8_t kLeaseBlockVersionFifo = 2;
constexpr char kLeaseFlagParked = 1;
constexpr uint32_t kMaxBackoffEntries = 64;

uint32_t KeyedCrc(std::string_view key, std::string_view body) {
  uint32_t crc = crc32c::Value(key);
  return crc32c::Extend(crc, body.data(), body.size());
}

// Appends the CRC over key + value-so-far.
std::string Seal(std::string_view key, std::string value) {
  PutFixed32(&value, KeyedCrc(key, value));
  return value;
}

// Checks length, CRC and version; returns the fields between the version byte and the CRC.
// The version goes to *version; only versions in [kValueVersion, max_version] are accepted.
absl::StatusOr<std::string_view> OpenVersioned(std::string_view key, std::string_view value,
                                               size_t min_body, uint8_t max_version,
                                               uint8_t* version) {
  if (value.size() < 1 + min_body + 4) {
    return absl::DataLossError("group state: short value for key " + std::string(key));
  }
  std::string_view covered = value.substr(0, value.size() - 4);
  uint32_t stored = DecodeFixed32(value.data() + value.size() - 4);
  if (KeyedCrc(key, covered) != stored) {
    return absl::DataLossError("group state: checksum mismatch for key " + std::string(key));
  }
  *version = static_cast<uint8_t>(covered[0]);
  if (*version < kValueVersion || *version > max_version) {
    return absl::DataLossError("group state: unknown value version for key " + std::string(key));
  }
  return covered.substr(1);
}

// OpenVersioned for values that have only version kValueVersion.
absl::StatusOr<std::string_view> Open(std::string_view key, std::string_view value,
                                      size_t min_body) {
  uint8_t version = 0;
  return OpenVersioned(key, value, min_body, kValueVersion, &version);
}

// qid of docs/formats/group-state.md: decimal without leading zeros, so each queue has exactly
// one key.
bool ParseQueueId(std::string_view s, int64_t* out) {
  if (s.size() > 1 && s[0] == '0') return false;
  return ParseNonNegativeInt64(s, out) && *out <= INT32_MAX;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxDestinationBytes) return false;
  for (char c : name) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

std::string QueuePart(const QueueKey& k) {
  return k.topic + "/" + k.read_topic + "/" + std::to_string(k.queue_id);
}

}  // namespace

bool ValidGroupName(std::string_view group) { return ValidName(group) && group[0] != '%'; }
bool ValidTopicName(std::string_view topic) { return ValidName(topic); }

std::string ProgressKey(const QueueKey& k) {
  return std::string(kKeyPrefix) + k.group + "/p/" + QueuePart(k);
}

std::string CommittedOffsetKey(std::string_view group, std::string_view topic, int32_t queue_id) {
  std::string key(kKeyPrefix);
  key.append(group).append("/o/").append(topic).append("/").append(std::to_string(queue_id));
  return key;
}

std::string LeaseKey(const QueueKey& k, int64_t queue_offset) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(queue_offset));
  return std::string(kKeyPrefix) + k.group + "/l/" + QueuePart(k) + "/" + buf;
}

std::string LeaseBlockKey(const QueueKey& k, int64_t first_offset) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(first_offset));
  return std::string(kKeyPrefix) + k.group + "/b/" + QueuePart(k) + "/" + buf;
}

std::string PolicyKey(const std::string& group) {
  return std::string(kKeyPrefix) + group + "/policy";
}

std::optional<ParsedKey> ParseKey(std::string_view key) {
  if (key == kLeaseTopicOffsetKey) return ParsedKey{ParsedKey::kLeaseTopicOffset, {}, 0};
  if (key == kHandleSecretKey) return ParsedKey{ParsedKey::kHandleSecret, {}, 0};
  std::string_view prefix = kKeyPrefix;
  if (key.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::vector<std::string_view> parts = Split(key.substr(prefix.size()), '/');
  if (parts.empty() || !ValidGroupName(parts[0])) return std::nullopt;
  ParsedKey out{ParsedKey::kPolicy, {}, 0};
  out.queue.group = std::string(parts[0]);
  if (parts.size() == 2 && parts[1] == "policy") return out;
  if (parts.size() == 4 && parts[1] == "o") {
    int64_t qid = 0;
    if (!ValidTopicName(parts[2]) || !ParseQueueId(parts[3], &qid)) return std::nullopt;
    out.kind = ParsedKey::kCommittedOffset;
    out.queue.topic = std::string(parts[2]);
    out.queue.queue_id = static_cast<int32_t>(qid);
    return out;
  }
  bool block = parts.size() == 6 && parts[1] == "b";
  bool lease = parts.size() == 6 && (parts[1] == "l" || block);
  bool progress = parts.size() == 5 && parts[1] == "p";
  if (!lease && !progress) return std::nullopt;
  int64_t qid = 0;
  if (!ValidTopicName(parts[2]) || !ValidTopicName(parts[3]) || !ParseQueueId(parts[4], &qid)) {
    return std::nullopt;
  }
  out.queue.topic = std::string(parts[2]);
  out.queue.read_topic = std::string(parts[3]);
  out.queue.queue_id = static_cast<int32_t>(qid);
  out.kind = block ? ParsedKey::kLeaseBlock : lease ? ParsedKey::kLease : ParsedKey::kProgress;
  if (lease && (parts[5].size() != 20 || !ParseNonNegativeInt64(parts[5], &out.queue_offset))) {
    return std::nullopt;
  }
  return out;
}

std::string EncodeOffsetValue(std::string_view key, int64_t offset) {
  std::string v(1, static_cast<char>(kValueVersion));
  PutFixed64(&v, static_cast<uint64_t>(offset));
  return Seal(key, std::move(v));
}

absl::StatusOr<int64_t> DecodeOffsetValue(std::string_view key, std::string_view value) {
  auto body = Open(key, value, 8);
  if (!body.ok()) return body.status();
  if (body->size() != 8) return absl::DataLossError("group state: bad offset value length");
  return static_cast<int64_t>(DecodeFixed64(body->data()));
}

std::string EncodeLeaseValue(std::string_view key, const LeaseRecord& lease) {
  std::string v(1, static_cast<char>(kValueVersion));
  PutFixed32(&v, lease.epoch);
  PutFixed32(&v, lease.attempt);
  PutFixed64(&v, static_cast<uint64_t>(lease.invisible_until_ms));
  PutFixed64(&v, static_cast<uint64_t>(lease.received_ms));
  return Seal(key, std::move(v));
}

absl::StatusOr<LeaseRecord> DecodeLeaseValue(std::string_view key, std::string_view value) {
  auto body = Open(key, value, 24);
  if (!body.ok()) return body.status();
  if (body->size() != 24) return absl::DataLossError("group state: bad lease value length");
  LeaseRecord r;
  r.epoch = DecodeFixed32(body->data());
  r.attempt = DecodeFixed32(body->data() + 4);
  r.invisible_until_ms = static_cast<int64_t>(DecodeFixed64(body->data() + 8));
  r.received_ms = static_cast<int64_t>(DecodeFixed64(body->data() + 16));
  return r;
}

std::string EncodeLeaseBlockValue(std::string_view key, const std::vector<BlockLease>& leases) {
  // Version 1 unless an entry needs the FIFO fields (parked flag, message group).
  bool v2 = false;
  for (const auto& [offset, lease] : leases) v2 = v2 || lease.parked || !lease.msg_group.empty();
  std::string v(1, static_cast<char>(v2 ? kLeaseBlockVersionFifo : kValueVersion));
  v.reserve(1 + 4 + leases.size() * (v2 ? 48 : 32) + 4);
  PutFixed32(&v, static_cast<uint32_t>(leases.size()));
  for (const auto& [offset, lease] : leases) {
    PutFixed64(&v, static_cast<uint64_t>(offset));
    PutFixed32(&v, lease.epoch);
    PutFixed32(&v, lease.attempt);
    PutFixed64(&v, static_cast<uint64_t>(lease.invisible_until_ms));
    PutFixed64(&v, static_cast<uint64_t>(lease.received_ms));
    if (v2) {
      v.push_back(static_cast<char>(lease.parked ? kLeaseFlagParked : 0));
      // Groups are at most kMaxMessageGroupBytes (checked at send); longer ones cannot occur.
      const size_t n = std::min<size_t>(lease.msg_group.size(), UINT16_MAX);
      PutFixed16(&v, static_cast<uint16_t>(n));
      v.append(lease.msg_group, 0, n);
    }
  }
  return Seal(key, std::move(v));
}

absl::StatusOr<std::vector<BlockLease>> DecodeLeaseBlockValue(std::string_view key,
                                                              std::string_view value) {
  uint8_t version = 0;
  auto body = OpenVersioned(key, value, 4, kLeaseBlockVersionFifo, &version);
  if (!body.ok()) return body.status();
  const bool v2 = version == kLeaseBlockVersionFifo;
  auto bad = [&] {
    return absl::DataLossError("group state: bad lease block value for key " + std::string(key));
  };
  Decoder d(*body);
  uint32_t n = 0;
  // Version 2 entries are at least 35 bytes (no group); version 1 exactly 32.
  if (!d.GetFixed32(&n) || n == 0 || n > kMaxBlockLeases ||
      (v2 ? d.remaining() < size_t{n} * 35 : d.remaining() != size_t{n} * 32)) {
    return bad();
  }
  std::vector<BlockLease> out;
  out.reserve(n);
  int64_t prev = -1;
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t offset = 0, until = 0, received = 0;
    LeaseRecord r;
    if (!d.GetFixed64(&offset) || !d.GetFixed32(&r.epoch) || !d.GetFixed32(&r.attempt) ||
        !d.GetFixed64(&until) || !d.GetFixed64(&received)) {
      return bad();
    }
    r.invisible_until_ms = static_cast<int64_t>(until);
    r.received_ms = static_cast<int64_t>(received);
    if (v2) {
      std::string_view flags, group;
      uint16_t len = 0;
      if (!d.GetBytes(1, &flags) || (flags[0] & ~kLeaseFlagParked) != 0 ||
          !d.GetFixed16(&len) || !d.GetBytes(len, &group)) {
        return bad();
      }
      r.parked = (flags[0] & kLeaseFlagParked) != 0;
      r.msg_group = std::string(group);
    }
    if (static_cast<int64_t>(offset) <= prev) {
      return absl::DataLossError("group state: lease block offsets out of order for key " +
                                 std::string(key));
    }
    prev = static_cast<int64_t>(offset);
    out.emplace_back(prev, std::move(r));
  }
  if (d.remaining() != 0) return bad();
  return out;
}

std::string EncodePolicyValue(std::string_view key, const GroupPolicy& policy) {
  std::string v(1, static_cast<char>(kValueVersion));
  PutFixed32(&v, static_cast<uint32_t>(policy.max_attempts));
  PutFixed64(&v, static_cast<uint64_t>(policy.ttl_ms));
  size_t n = std::min<size_t>(policy.backoff_ms.size(), kMaxBackoffEntries);
  PutFixed32(&v, static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) PutFixed64(&v, static_cast<uint64_t>(policy.backoff_ms[i]));
  return Seal(key, std::move(v));
}

absl::StatusOr<GroupPolicy> DecodePolicyValue(std::string_view key, std::string_view value) {
  auto body = Open(key, value, 16);
  if (!body.ok()) return body.status();
  Decoder d(*body);
  uint32_t max_attempts = 0, n = 0;
  uint64_t ttl = 0;
  if (!d.GetFixed32(&max_attempts) || !d.GetFixed64(&ttl) || !d.GetFixed32(&n) ||
      n > kMaxBackoffEntries || d.remaining() != size_t{n} * 8) {
    return absl::DataLossError("group state: bad policy value");
  }
  GroupPolicy p;
  p.max_attempts = static_cast<int>(max_attempts);
  p.ttl_ms = static_cast<int64_t>(ttl);
  p.backoff_ms.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t b = 0;
    d.GetFixed64(&b);
    p.backoff_ms.push_back(static_cast<int64_t>(b));
  }
  return p;
}

std::string EncodeSecretValue(std::string_view key, uint64_t secret) {
  std::string v(1, static_cast<char>(kValueVersion));
  PutFixed64(&v, secret);
  return Seal(key, std::move(v));
}

absl::StatusOr<uint64_t> DecodeSecretValue(std::string_view key, std::string_view value) {
  auto body = Open(key, value, 8);
  if (!body.ok()) return body.status();
  if (body->size() != 8) return absl::DataLossError("group state: bad secret value length");
  return DecodeFixed64(body->data());
}

}  // namespace tokimq::consumer
