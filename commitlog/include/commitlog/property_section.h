// Building the properties section of a CommitLog record (docs/formats/commitlog.md: repeated
// { u32 key length, key, u32 value length, value }, keys strictly ascending in byte order)
// straight from a producer's pairs, for Message::encoded_properties: the send path builds it
// without a std::map (issue 21 item 1, docs/performance.md "Round 3"). Reading and editing a
// section: record::FindProperty / DecodeProperties / EditProperties (commitlog/record.h).
//
// Pure functions; thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tokimq::record {

// One property for EncodeProperties: views of strings the caller keeps alive during the call.
struct PropertyPair {
  std::string_view key;
  std::string_view value;
};

// Writes to *out (replacing its contents) the properties section of the map that setting each
// of `pairs`, in the order given, into an empty std::map<std::string, std::string> would give
// (m[key] = value: a later pair of a key wins): byte for byte what record::Encode writes for
// that map, in one pass over the sorted pairs and one allocation, without building the map.
// Reorders `pairs` (a stable sort by key). Any input is valid; no pairs give an empty section.
void EncodeProperties(std::span<PropertyPair> pairs, std::string* out);

}  // namespace tokimq::record
