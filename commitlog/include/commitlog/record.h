// Record codec of the CommitLog (grammar: docs/formats/commitlog.md).
//
// A CommitLog segment is a sequence of records. A message record carries one Message; a blank
// record marks that the rest of its segment is unused (the next record did not fit). Both start
// with the same 12-byte prefix: magic (u32), total size (u32), CRC32C (u32). The magic carries
// the record kind and the format version. The CRC covers every byte of the record except the CRC
// field itself (bytes [0, 8) then [12, total_size)).
//
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "commitlog/message.h"

namespace tokimq::record {

// Persisted values: never renumbered. Low byte = kind and version; upper bytes = "TKQ".
inline constexpr uint32_t kMessageMagicV1 = 0x51544B01;
inline constexpr uint32_t kBlankMagicV1 = 0x51544BB1;

inline constexpr size_t kPrefixSize = 12;  // magic, total size, crc
inline constexpr size_t kBlankSize = kPrefixSize;
// Size of a message record with empty topic, properties and body.
inline constexpr size_t kMinMessageSize = 62;
inline constexpr size_t kMaxTopicSize = 0xFFFF;

// Bytes `msg` occupies as a record. The properties section is msg.encoded_properties when that
// is set (copied verbatim), else msg.properties encoded in key order.
size_t EncodedSize(const Message& msg);

// Writes the record of `msg` into dst[0, EncodedSize(msg)); dst must have room for it.
// Uses msg.physical_offset and msg.store_ms as they are.
void EncodeTo(const Message& msg, char* dst);
// Same, for a caller that already knows encoded_size == EncodedSize(msg) (saves two walks of
// the properties).
void EncodeTo(const Message& msg, size_t encoded_size, char* dst);
// Appends the record of `msg` to `dst`.
void Encode(const Message& msg, std::string* dst);

// Writes the 12-byte blank record that covers `covered` bytes (the rest of a segment).
void EncodeBlankTo(uint32_t covered, char* dst);

struct Prefix {
  uint32_t magic = 0;
  uint32_t total_size = 0;
  uint32_t crc = 0;
};
// Reads the 12-byte prefix at `p` (no validation).
Prefix DecodePrefix(const char* p);

// True when `rec` (at least kBlankSize bytes) is a blank record with a valid checksum.
bool IsValidBlank(std::string_view rec);

// Decodes a complete message record (`rec` holds exactly total_size bytes). kDataLoss on a bad
// magic, a size mismatch, a checksum mismatch or malformed fields. The message's
// physical_offset is taken from the record.
absl::Status Decode(std::string_view rec, Message* out);

// A message record decoded in place: the string views point into the bytes given to DecodeView
// and are valid only as long as they are. No allocation. `properties` is the raw property block
// (u32 key length, key, u32 value length, value, repeated); FindProperty searches it.
struct RecordView {
  std::string_view bytes;  // the whole record (size bytes), as given to DecodeView
  uint32_t size = 0;  // total record bytes
  uint32_t flags = 0;
  int32_t queue_id = 0;
  QueueOffset queue_offset = QueueOffset::kNone();
  PhysicalOffset physical_offset = PhysicalOffset::kNone();
  int64_t born_ms = 0;
  int64_t store_ms = 0;
  std::string_view topic;
  std::string_view properties;
  std::string_view body;

  // Value of the first property named `key` (the one Decode keeps); false when absent.
  bool FindProperty(std::string_view key, std::string_view* value) const;
};

// Same checks and errors as Decode (magic, size, checksum, every field and property well
// formed), without building a Message.
absl::Status DecodeView(std::string_view rec, RecordView* out);
// DecodeView without the checksum, for an in-memory copy of a record that DecodeView already
// accepted when it was read (e.g. ReceivedMessage::record): every length is still checked
// against `rec`, so a bad copy is an error, never an out-of-bounds read.
absl::Status DecodeCopiedView(std::string_view rec, RecordView* out);
// Copies a view (from DecodeView) into `out`.
void MessageFromView(const RecordView& view, Message* out);

// True when `rec` (exactly total_size bytes) is a message record whose checksum verifies.
bool VerifyMessage(std::string_view rec);

// The properties section of a record (RecordView::properties, Message::encoded_properties):
// repeated { u32 key length, key, u32 value length, value }.

// Value of the first property named `key` in the section `props`; false when absent (or when
// the section is malformed before it).
bool FindProperty(std::string_view props, std::string_view key, std::string_view* value);

// Replaces *out with the properties of the section `props`, the first of duplicate keys kept
// (as Decode keeps). False when `props` is malformed; *out then holds the pairs before the bad
// one.
bool DecodeProperties(std::string_view props, std::map<std::string, std::string>* out);

// One change for EditProperties: set `key` to `*value`, or remove `key` (value std::nullopt).
struct PropertyEdit {
  std::string_view key;
  std::optional<std::string_view> value;
};

// Writes to *out (replacing its contents) the section `props` with `edits` applied, in one
// pass and without building a map: every stored property whose key is edited is dropped, each
// edit with a value is placed in key order, the rest is copied. The result is byte for byte the
// section Encode writes for the map that DecodeProperties(props) gives after each edit is
// applied to it (erase, or insert_or_assign): keys ascending and unique, the first of
// duplicate stored keys kept.
// Needs `props` keys in non-descending byte order (our encoder writes them ascending) and
// `edits` keys strictly ascending. Returns false, *out unspecified, when either does not hold
// or `props` is malformed; the caller then goes through the map, which gives that result for
// any input.
bool EditProperties(std::string_view props, std::span<const PropertyEdit> edits, std::string* out);

}  // namespace tokimq::record
