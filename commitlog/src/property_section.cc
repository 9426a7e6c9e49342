// EncodeProperties (see commitlog/property_section.h).
#include "commitlog/property_section.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "common/coding.h"

namespace tokimq::record {

void EncodeProperties(std::span<PropertyPair> pairs, std::string* out) {
  auto by_key = [](const PropertyPair& a, const PropertyPair& b) { return a.key < b.key; };
  if (pairs.size() <= 16) {
    // Insertion sort: stable, no allocation, and fastest for the handful a send carries.
    for (size_t i = 1; i < pairs.size(); ++i) {
      PropertyPair p = pairs[i];
      size_t j = i;
      for (; j > 0 && by_key(p, pairs[j - 1]); --j) pairs[j] = pairs[j - 1];
      pairs[j] = p;
    }
  } else {
    std::stable_sort(pairs.begin(), pairs.end(), by_key);
  }
  // The last of a run of equal keys is the one the map keeps.
  auto kept = [&](size_t i) { return i + 1 == pairs.size() || pairs[i + 1].key != pairs[i].key; };
  size_t size = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (kept(i)) size += 8 + pairs[i].key.size() + pairs[i].value.size();
  }
  out->resize(size);
  char* p = out->data();
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (!kept(i)) continue;
    for (std::string_view s : {pairs[i].key, pairs[i].value}) {
      EncodeFixed32(p, static_cast<uint32_t>(s.size()));
      if (!s.empty()) std::memcpy(p + 4, s.data(), s.size());
      p += 4 + s.size();
    }
  }
}

}  // namespace tokimq::record
