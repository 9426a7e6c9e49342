#include "commitlog/record.h"

#include <cstring>
#include <tuple>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/status.h"

namespace tokimq {

size_t Message::EncodedSize() const { return record::EncodedSize(*this); }

namespace record {
namespace {

constexpr size_t kTopicLenPos = 52;

uint32_t RecordCrc(std::string_view rec) {
  uint32_t crc = crc32c::Value(rec.data(), 8);
  return crc32c::Extend(crc, rec.data() + kPrefixSize, rec.size() - kPrefixSize);
}

size_t PropertiesSize(const Message& msg) {
  if (!msg.encoded_properties.empty()) return msg.encoded_properties.size();
  size_t n = 0;
  for (const auto& [k, v] : msg.properties) n += 8 + k.size() + v.size();
  return n;
}

char* PutBytes(char* p, std::string_view s) {
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

char* PutProperty(char* p, std::string_view k, std::string_view v) {
  EncodeFixed32(p, static_cast<uint32_t>(k.size()));
  p = PutBytes(p + 4, k);
  EncodeFixed32(p, static_cast<uint32_t>(v.size()));
  return PutBytes(p + 4, v);
}

}  // namespace

size_t EncodedSize(const Message& msg) {
  return kMinMessageSize + msg.topic.size() + PropertiesSize(msg) + msg.body.size();
}

void EncodeTo(const Message& msg, char* dst) { EncodeTo(msg, EncodedSize(msg), dst); }

void EncodeTo(const Message& msg, size_t encoded_size, char* dst) {
  const size_t total = encoded_size;
  const size_t props = total - kMinMessageSize - msg.topic.size() - msg.body.size();
  EncodeFixed32(dst, kMessageMagicV1);
  EncodeFixed32(dst + 4, static_cast<uint32_t>(total));
  EncodeFixed32(dst + 12, msg.flags);
  EncodeFixed32(dst + 16, static_cast<uint32_t>(msg.queue_id));
  EncodeFixed64(dst + 20, static_cast<uint64_t>(msg.queue_offset.value()));
  EncodeFixed64(dst + 28, static_cast<uint64_t>(msg.physical_offset.value()));
  EncodeFixed64(dst + 36, static_cast<uint64_t>(msg.born_ms));
  EncodeFixed64(dst + 44, static_cast<uint64_t>(msg.store_ms));
  EncodeFixed16(dst + kTopicLenPos, static_cast<uint16_t>(msg.topic.size()));
  char* p = PutBytes(dst + kTopicLenPos + 2, msg.topic);
  EncodeFixed32(p, static_cast<uint32_t>(props));
  p += 4;
  if (!msg.encoded_properties.empty()) {
    p = PutBytes(p, msg.encoded_properties);  // already the section's bytes
  } else {
    for (const auto& [k, v] : msg.properties) p = PutProperty(p, k, v);
  }
  EncodeFixed32(p, static_cast<uint32_t>(msg.body.size()));
  PutBytes(p + 4, msg.body);
  EncodeFixed32(dst + 8, RecordCrc(std::string_view(dst, total)));
}

void Encode(const Message& msg, std::string* dst) {
  size_t old = dst->size();
  dst->resize(old + EncodedSize(msg));
  EncodeTo(msg, dst->data() + old);
}

void EncodeBlankTo(uint32_t covered, char* dst) {
  EncodeFixed32(dst, kBlankMagicV1);
  EncodeFixed32(dst + 4, covered);
  EncodeFixed32(dst + 8, crc32c::Value(dst, 8));
}

Prefix DecodePrefix(const char* p) {
  return Prefix{DecodeFixed32(p), DecodeFixed32(p + 4), DecodeFixed32(p + 8)};
}

bool IsValidBlank(std::string_view rec) {
  if (rec.size() < kBlankSize) return false;
  Prefix pre = DecodePrefix(rec.data());
  return pre.magic == kBlankMagicV1 && pre.total_size >= kBlankSize &&
         pre.crc == crc32c::Value(rec.data(), 8);
}

bool VerifyMessage(std::string_view rec) {
  if (rec.size() < kMinMessageSize) return false;
  Prefix pre = DecodePrefix(rec.data());
  return pre.magic == kMessageMagicV1 && pre.total_size == rec.size() && pre.crc == RecordCrc(rec);
}

static absl::Status DecodeViewImpl(std::string_view rec, RecordView* out, bool verify_crc) {
  if (rec.size() < kMinMessageSize) return absl::DataLossError("record shorter than its header");
  Prefix pre = DecodePrefix(rec.data());
  if (pre.magic != kMessageMagicV1) return absl::DataLossError("bad record magic");
  if (pre.total_size != rec.size()) return absl::DataLossError("record size mismatch");
  if (verify_crc && pre.crc != RecordCrc(rec)) {
    return absl::DataLossError("record checksum mismatch");
  }
  Decoder d(rec.substr(12));
  uint32_t flags = 0, qid = 0, props_len = 0;
  uint64_t qoff = 0, phys = 0, born = 0, store = 0;
  uint16_t topic_len = 0;
  if (!d.GetFixed32(&flags) || !d.GetFixed32(&qid) || !d.GetFixed64(&qoff) ||
      !d.GetFixed64(&phys) || !d.GetFixed64(&born) || !d.GetFixed64(&store) ||
      !d.GetFixed16(&topic_len) || !d.GetBytes(topic_len, &out->topic) ||
      !d.GetFixed32(&props_len) || !d.GetBytes(props_len, &out->properties) ||
      !d.GetLengthPrefixed(&out->body) || d.remaining() != 0) {
    return absl::DataLossError("malformed record fields");
  }
  Decoder pd(out->properties);
  while (pd.remaining() > 0) {
    std::string_view k, v;
    if (!pd.GetLengthPrefixed(&k) || !pd.GetLengthPrefixed(&v)) {
      return absl::DataLossError("malformed record properties");
    }
  }
  out->bytes = rec;
  out->size = pre.total_size;
  out->flags = flags;
  out->queue_id = static_cast<int32_t>(qid);
  out->queue_offset = QueueOffset(static_cast<int64_t>(qoff));
  out->physical_offset = PhysicalOffset(static_cast<int64_t>(phys));
  out->born_ms = static_cast<int64_t>(born);
  out->store_ms = static_cast<int64_t>(store);
  return absl::OkStatus();
}

absl::Status DecodeView(std::string_view rec, RecordView* out) {
  return DecodeViewImpl(rec, out, true);
}

absl::Status DecodeCopiedView(std::string_view rec, RecordView* out) {
  return DecodeViewImpl(rec, out, false);
}

bool RecordView::FindProperty(std::string_view key, std::string_view* value) const {
  return record::FindProperty(properties, key, value);
}

bool FindProperty(std::string_view props, std::string_view key, std::string_view* value) {
  Decoder pd(props);
  std::string_view k, v;
  while (pd.GetLengthPrefixed(&k) && pd.GetLengthPrefixed(&v)) {
    if (k == key) {
      *value = v;
      return true;
    }
  }
  return false;
}

bool DecodeProperties(std::string_view props, std::map<std::string, std::string>* out) {
  out->clear();
  Decoder pd(props);
  while (pd.remaining() > 0) {
    std::string_view k, v;
    if (!pd.GetLengthPrefixed(&k) || !pd.GetLengthPrefixed(&v)) return false;
    // Ascending input (our encoder) appends at the end: the hint makes each insert O(1).
    // An existing key is kept: the first of duplicates wins.
    out->emplace_hint(out->end(), std::piecewise_construct,
                      std::forward_as_tuple(k.data(), k.size()),
                      std::forward_as_tuple(v.data(), v.size()));
  }
  return true;
}

bool EditProperties(std::string_view props, std::span<const PropertyEdit> edits, std::string* out) {
  size_t cap = props.size();  // dropping only shrinks; each set adds at most its own bytes
  for (size_t i = 0; i < edits.size(); ++i) {
    if (i > 0 && edits[i - 1].key >= edits[i].key) return false;
    if (edits[i].value) cap += 8 + edits[i].key.size() + edits[i].value->size();
  }
  out->resize(cap);
  char* const begin = out->data();
  char* p = begin;
  size_t e = 0;  // next edit not yet written or passed
  std::string_view prev;
  bool have_prev = false;
  Decoder pd(props);
  while (pd.remaining() > 0) {
    std::string_view k, v;
    if (!pd.GetLengthPrefixed(&k) || !pd.GetLengthPrefixed(&v)) return false;
    if (have_prev) {
      const int c = k.compare(prev);
      if (c < 0) return false;  // not in our encoder's order: the caller takes the map path
      if (c == 0) continue;     // duplicate: the first one was kept (or dropped, if edited)
    }
    prev = k;
    have_prev = true;
    bool edited = false;
    // Edits ordered before k go first; an edit of k itself replaces it (its value, if any, is
    // written when a later key or the end passes it).
    for (; e < edits.size(); ++e) {
      const int c = edits[e].key.compare(k);
      if (c > 0) break;
      if (c == 0) {
        edited = true;
        break;
      }
      if (edits[e].value) p = PutProperty(p, edits[e].key, *edits[e].value);
    }
    if (!edited) p = PutProperty(p, k, v);
  }
  for (; e < edits.size(); ++e) {
    if (edits[e].value) p = PutProperty(p, edits[e].key, *edits[e].value);
  }
  out->resize(static_cast<size_t>(p - begin));
  return true;
}

absl::Status Decode(std::string_view rec, Message* out) {
  RecordView view;
  TOKIMQ_RETURN_IF_ERROR(DecodeView(rec, &view));
  MessageFromView(view, out);
  return absl::OkStatus();
}

void MessageFromView(const RecordView& view, Message* out) {
  out->flags = view.flags;
  out->queue_id = view.queue_id;
  out->queue_offset = view.queue_offset;
  out->physical_offset = view.physical_offset;
  out->born_ms = view.born_ms;
  out->store_ms = view.store_ms;
  out->topic.assign(view.topic.data(), view.topic.size());
  (void)DecodeProperties(view.properties, &out->properties);  // DecodeView checked them
  out->encoded_properties.clear();
  out->body.assign(view.body.data(), view.body.size());
}

}  // namespace record
}  // namespace tokimq
