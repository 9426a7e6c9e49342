#include "client/ordering/properties.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/fnv1a.h"
#include "common/parse_int.h"

namespace tokimq::ordering {
namespace {

// Quotes a property value for an error message, cut to a readable length.
std::string Quote(std::string_view value) {
  constexpr size_t kMax = 64;
  std::string out = "\"";
  out.append(value.substr(0, kMax));
  if (value.size() > kMax) out += "...";
  out += "\"";
  return out;
}

absl::StatusOr<uint64_t> ParseDecimal(const char* property, std::string_view value, uint64_t max) {
  uint64_t v = 0;
  if (!ParseUint64(value, &v) || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(property, " must be a decimal integer in [0, ", max, "], got ", Quote(value)));
  }
  return v;
}

}  // namespace

uint64_t HashOrderingKey(std::string_view business_key) { return Fnv1a64(business_key); }

std::string_view OrderingName(EventAtomicOrdering ordering) {
  switch (ordering) {
    case EventAtomicOrdering::Relaxed:
      return "RELAXED";
    case EventAtomicOrdering::Acquire:
      return "ACQUIRE";
    case EventAtomicOrdering::Release:
      return "RELEASE";
    case EventAtomicOrdering::AcqRel:
      return "ACQ_REL";
  }
  return "INVALID";
}

absl::StatusOr<EventAtomicOrdering> ParseOrdering(std::string_view name) {
  for (auto o : {EventAtomicOrdering::Relaxed, EventAtomicOrdering::Acquire,
                 EventAtomicOrdering::Release, EventAtomicOrdering::AcqRel}) {
    if (name == OrderingName(o)) return o;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      kModeProperty, " must be one of RELAXED, ACQUIRE, RELEASE, ACQ_REL, got ", Quote(name)));
}

void EncodeOrderingProperties(const PlanRecord& header, Properties* properties) {
  (*properties)[kKeyProperty] = absl::StrCat(header.key);
  (*properties)[kTagProperty] = absl::StrCat(static_cast<uint16_t>(header.tag));
  (*properties)[kModeProperty] = std::string(OrderingName(header.ordering));
}

bool HasOrderingProperties(const Properties& properties) {
  return properties.contains(kKeyProperty) || properties.contains(kTagProperty) ||
         properties.contains(kModeProperty);
}

absl::StatusOr<PlanRecord> DecodeOrderingProperties(const Properties& properties) {
  if (!HasOrderingProperties(properties)) {
    return absl::NotFoundError(absl::StrCat("message carries no ordering header (", kKeyProperty,
                                            ", ", kTagProperty, ", ", kModeProperty, ")"));
  }
  for (const char* name : {kKeyProperty, kTagProperty, kModeProperty}) {
    if (!properties.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ordering header incomplete: property ", name, " is missing"));
    }
  }
  PlanRecord record{};
  auto key =
      ParseDecimal(kKeyProperty, properties.at(kKeyProperty), std::numeric_limits<uint64_t>::max());
  if (!key.ok()) return key.status();
  auto tag =
      ParseDecimal(kTagProperty, properties.at(kTagProperty), std::numeric_limits<uint16_t>::max());
  if (!tag.ok()) return tag.status();
  auto mode = ParseOrdering(properties.at(kModeProperty));
  if (!mode.ok()) return mode.status();
  record.key = *key;
  record.tag = EventTypeTag{static_cast<uint16_t>(*tag)};
  record.ordering = *mode;
  return record;
}

}  // namespace tokimq::ordering
