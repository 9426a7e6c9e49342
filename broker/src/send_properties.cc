// EncodeSendProperties (see send_properties.h).
#include "send_properties.h"

#include "absl/container/inlined_vector.h"
#include "commitlog/property_section.h"
#include "common/property_keys.h"

namespace tokimq::broker {

void EncodeSendProperties(const proto::SendEntry& e, const std::string* message_group,
                          const std::string& message_id, std::string* out) {
  // A send usually carries a handful of properties: no heap allocation for the pairs.
  absl::InlinedVector<record::PropertyPair, 12> pairs;
  pairs.reserve(static_cast<size_t>(e.properties_size()) + 4);
  for (const auto& [k, v] : e.properties()) pairs.push_back({k, v});
  if (!e.key().empty()) pairs.push_back({prop::kKeys, e.key()});
  if (!e.tag().empty()) pairs.push_back({prop::kTag, e.tag()});
  if (message_group != nullptr) pairs.push_back({prop::kMessageGroup, *message_group});
  pairs.push_back({prop::kMessageId, message_id});
  record::EncodeProperties(std::span(pairs.data(), pairs.size()), out);
}

}  // namespace tokimq::broker
