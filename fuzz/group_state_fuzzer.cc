// Fuzz target: group-state keys and values (broker/src/consumer/group_state.h,
// docs/formats/group-state.md).
//
// The first byte picks a mode, the rest is the payload:
//   mode % 3 == 0: the payload as a RocksDB key: ParseKey.
//   mode % 3 == 1: a key and a value from the payload, decoded as each value kind as stored.
//   mode % 3 == 2: the same with the value's trailing CRC made right for the key first, so the
//                  decoders reach the fields.
// Properties: a key ParseKey accepts is rebuilt byte for byte from what it parsed (one key per
// queue, lease or policy); a value that decodes re-encodes to the same bytes (a lease block
// written as version 2 without any FIFO field re-encodes as version 1: then to the same
// leases).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "consumer/group_state.h"
#include "fuzz_check.h"

namespace tokimq::consumer {
namespace {

bool SameLease(const LeaseRecord& a, const LeaseRecord& b) {
  return a.epoch == b.epoch && a.attempt == b.attempt &&
         a.invisible_until_ms == b.invisible_until_ms && a.received_ms == b.received_ms &&
         a.parked == b.parked && a.msg_group == b.msg_group;
}

void CheckKey(std::string_view key) {
  std::optional<ParsedKey> k = ParseKey(key);
  if (!k) return;
  std::string rebuilt;
  switch (k->kind) {
    case ParsedKey::kProgress:
      rebuilt = ProgressKey(k->queue);
      break;
    case ParsedKey::kLease:
      rebuilt = LeaseKey(k->queue, k->queue_offset);
      break;
    case ParsedKey::kLeaseBlock:
      rebuilt = LeaseBlockKey(k->queue, k->queue_offset);
      break;
    case ParsedKey::kPolicy:
      rebuilt = PolicyKey(k->queue.group);
      break;
    case ParsedKey::kLeaseTopicOffset:
      rebuilt = kLeaseTopicOffsetKey;
      break;
    case ParsedKey::kHandleSecret:
      rebuilt = kHandleSecretKey;
      break;
    case ParsedKey::kCommittedOffset:
      rebuilt = CommittedOffsetKey(k->queue.group, k->queue.topic, k->queue.queue_id);
      break;
  }
  FUZZ_CHECK(rebuilt == key);
  FUZZ_CHECK(ParseKey(rebuilt).has_value());
}

void CheckValue(std::string_view key, std::string_view value) {
  if (auto v = DecodeOffsetValue(key, value); v.ok()) {
    FUZZ_CHECK(EncodeOffsetValue(key, *v) == value);
  }
  if (auto v = DecodeLeaseValue(key, value); v.ok()) {
    FUZZ_CHECK(EncodeLeaseValue(key, *v) == value);
  }
  if (auto v = DecodeSecretValue(key, value); v.ok()) {
    FUZZ_CHECK(EncodeSecretValue(key, *v) == value);
  }
  if (auto v = DecodePolicyValue(key, value); v.ok()) {
    FUZZ_CHECK(EncodePolicyValue(key, *v) == value);
  }
  if (auto v = DecodeLeaseBlockValue(key, value); v.ok()) {
    FUZZ_CHECK(!v->empty() && v->size() <= kMaxBlockLeases);
    bool fifo = false;
    for (const auto& [offset, lease] : *v) fifo = fifo || lease.parked || !lease.msg_group.empty();
    const std::string again = EncodeLeaseBlockValue(key, *v);
    if (fifo || value[0] == 1) FUZZ_CHECK(again == value);
    auto back = DecodeLeaseBlockValue(key, again);
    FUZZ_CHECK(back.ok() && back->size() == v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      FUZZ_CHECK((*back)[i].first == (*v)[i].first);
      FUZZ_CHECK(SameLease((*back)[i].second, (*v)[i].second));
    }
  }
}

}  // namespace
}  // namespace tokimq::consumer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq;
  using namespace tokimq::consumer;
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 3;
  if (mode == 0) {
    CheckKey(fuzz::AsView(data + 1, size - 1));
    return 0;
  }
  FuzzedDataProvider in(data + 1, size - 1);
  const std::string key = in.ConsumeRandomLengthString(64);
  std::string value = in.ConsumeRemainingBytesAsString();
  if (mode == 2 && value.size() >= 4) {
    uint32_t crc = crc32c::Value(key);
    crc = crc32c::Extend(crc, value.data(), value.size() - 4);
    EncodeFixed32(value.data() + value.size() - 4, crc);
  }
  CheckValue(key, value);
  return 0;
}
