// Fuzz target: CommitLog record decoding (commitlog/record.h, docs/formats/commitlog.md).
//
// The first input byte picks a mode, the rest is the payload:
//   mode % 4 == 0: the payload as a record, as stored.
//   mode % 4 == 1: the payload as a record whose magic, total size and CRC are made right
//                  first, so the fuzzer reaches the field and property parsing behind them.
//   mode % 4 == 2: the payload as a properties section plus edits: EditProperties against the
//                  map path it documents to equal.
//   mode % 4 == 3: a Message built from the payload: encode, then decode.
// Properties: a record DecodeView accepts is accepted by Decode and DecodeCopiedView with the
// same fields; re-encoding the decoded Message decodes to the same Message, and gives the same
// bytes when the properties section was canonical (keys strictly ascending); FindProperty
// agrees with DecodeProperties (first of duplicates); blank records are checked the same way.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commitlog/record.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "fuzz_check.h"

namespace tokimq {
namespace {

bool SameMessage(const Message& a, const Message& b) {
  return a.topic == b.topic && a.queue_id == b.queue_id && a.queue_offset == b.queue_offset &&
         a.physical_offset == b.physical_offset && a.born_ms == b.born_ms &&
         a.store_ms == b.store_ms && a.flags == b.flags && a.properties == b.properties &&
         a.body == b.body && a.encoded_properties.empty() && b.encoded_properties.empty();
}

// The section Encode writes for `props` (keys ascending, unique).
std::string EncodeSection(const std::map<std::string, std::string>& props) {
  std::string out;
  for (const auto& [k, v] : props) {
    PutLengthPrefixed(&out, k);
    PutLengthPrefixed(&out, v);
  }
  return out;
}

// The record CRC as docs/formats/commitlog.md defines it: bytes [0, 8) then [12, size).
void FixPrefix(std::string* rec) {
  if (rec->size() < record::kPrefixSize) return;
  EncodeFixed32(rec->data(), record::kMessageMagicV1);
  EncodeFixed32(rec->data() + 4, static_cast<uint32_t>(rec->size()));
  uint32_t crc = crc32c::Value(rec->data(), 8);
  crc = crc32c::Extend(crc, rec->data() + 12, rec->size() - 12);
  EncodeFixed32(rec->data() + 8, crc);
}

void CheckRecord(std::string_view rec) {
  record::RecordView view;
  absl::Status s = record::DecodeView(rec, &view);
  Message m;
  absl::Status full = record::Decode(rec, &m);
  FUZZ_CHECK(s.ok() == full.ok());
  if (!s.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(s));
    return;
  }
  FUZZ_CHECK(record::VerifyMessage(rec));
  FUZZ_CHECK(view.size == rec.size());
  FUZZ_CHECK(view.bytes.data() == rec.data() && view.bytes.size() == rec.size());

  record::RecordView copied;
  FUZZ_CHECK(record::DecodeCopiedView(rec, &copied).ok());
  FUZZ_CHECK(copied.topic == view.topic && copied.body == view.body &&
             copied.properties == view.properties && copied.queue_offset == view.queue_offset);

  std::map<std::string, std::string> props;
  FUZZ_CHECK(record::DecodeProperties(view.properties, &props));
  FUZZ_CHECK(props == m.properties);
  for (const auto& [k, v] : props) {
    std::string_view found;
    FUZZ_CHECK(view.FindProperty(k, &found));
    FUZZ_CHECK(found == v);
  }

  // Re-encode the decoded message.
  std::string again;
  record::Encode(m, &again);
  FUZZ_CHECK(again.size() == record::EncodedSize(m));
  Message m2;
  FUZZ_CHECK(record::Decode(again, &m2).ok());
  FUZZ_CHECK(SameMessage(m, m2));
  if (EncodeSection(props) == view.properties) FUZZ_CHECK(again == rec);

  // The same message with its properties as encoded bytes gives the same record.
  Message raw = m;
  raw.properties.clear();
  raw.encoded_properties = EncodeSection(props);
  std::string from_raw;
  record::Encode(raw, &from_raw);
  FUZZ_CHECK(from_raw == again);
}

void CheckBlank(std::string_view rec) {
  if (!record::IsValidBlank(rec)) return;
  record::Prefix p = record::DecodePrefix(rec.data());
  char buf[record::kBlankSize];
  record::EncodeBlankTo(p.total_size, buf);
  FUZZ_CHECK(std::string_view(buf, sizeof(buf)) == rec.substr(0, record::kBlankSize));
}

void CheckEdits(FuzzedDataProvider* in) {
  const std::string props = in->ConsumeRandomLengthString(512);
  std::vector<std::string> keys;
  std::vector<std::optional<std::string>> values;
  const int n = in->ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < n; ++i) {
    keys.push_back(in->ConsumeRandomLengthString(8));
    if (in->ConsumeBool()) {
      values.push_back(in->ConsumeRandomLengthString(16));
    } else {
      values.push_back(std::nullopt);
    }
  }
  std::vector<record::PropertyEdit> edits;
  for (size_t i = 0; i < keys.size(); ++i) {
    edits.push_back({keys[i], values[i] ? std::optional<std::string_view>(*values[i])
                                        : std::nullopt});
  }
  std::string out;
  const bool ok = record::EditProperties(props, edits, &out);

  std::map<std::string, std::string> map;
  const bool well_formed = record::DecodeProperties(props, &map);
  bool ascending_edits = true;
  for (size_t i = 1; i < keys.size(); ++i) ascending_edits = ascending_edits && keys[i - 1] < keys[i];
  bool ordered_props = true;  // keys non-descending, as our encoder writes them
  if (well_formed) {
    Decoder d(props);
    std::string_view k, v, prev;
    bool first = true;
    while (d.GetLengthPrefixed(&k) && d.GetLengthPrefixed(&v)) {
      if (!first && k < prev) ordered_props = false;
      prev = k;
      first = false;
    }
  }
  // Documented: false exactly when an input condition does not hold.
  FUZZ_CHECK(ok == (well_formed && ascending_edits && ordered_props));
  if (!ok) return;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (values[i]) {
      map.insert_or_assign(keys[i], *values[i]);
    } else {
      map.erase(keys[i]);
    }
  }
  FUZZ_CHECK(out == EncodeSection(map));
}

void CheckEncode(FuzzedDataProvider* in) {
  Message m;
  m.topic = in->ConsumeRandomLengthString(64);
  m.queue_id = in->ConsumeIntegral<int32_t>();
  m.queue_offset = QueueOffset(in->ConsumeIntegral<int64_t>());
  m.physical_offset = PhysicalOffset(in->ConsumeIntegral<int64_t>());
  m.born_ms = in->ConsumeIntegral<int64_t>();
  m.store_ms = in->ConsumeIntegral<int64_t>();
  m.flags = in->ConsumeIntegral<uint32_t>();
  const int n = in->ConsumeIntegralInRange(0, 8);
  for (int i = 0; i < n; ++i) {
    std::string k = in->ConsumeRandomLengthString(16);
    m.properties[k] = in->ConsumeRandomLengthString(32);
  }
  m.body = in->ConsumeRemainingBytesAsString();
  std::string rec;
  record::Encode(m, &rec);
  FUZZ_CHECK(rec.size() == m.EncodedSize());
  Message back;
  FUZZ_CHECK(record::Decode(rec, &back).ok());
  FUZZ_CHECK(SameMessage(m, back));
  CheckRecord(rec);
}

}  // namespace
}  // namespace tokimq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 4;
  std::string payload(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (mode) {
    case 0:
      tokimq::CheckRecord(payload);
      tokimq::CheckBlank(payload);
      break;
    case 1:
      tokimq::FixPrefix(&payload);
      tokimq::CheckRecord(payload);
      break;
    case 2: {
      FuzzedDataProvider in(data + 1, size - 1);
      tokimq::CheckEdits(&in);
      break;
    }
    case 3: {
      FuzzedDataProvider in(data + 1, size - 1);
      tokimq::CheckEncode(&in);
      break;
    }
  }
  return 0;
}
