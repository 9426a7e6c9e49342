#include "client/ordering/properties.h"

#include <charconv>
#include <limits>

#include "absl/strings/str_cat.h"

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
  const char* begin = value.data();
  const char* end = value.data() + value.size();
  const bool digits_only =
      !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos;
  auto [ptr, ec] = std::from_chars(begin, end, v, 10);
  if (!digits_only || ec != std::errc() || ptr != end || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(property, " must be a decimal integer in [0, ", max, "], got ", Quote(value)));
  }
  return v;
}

}  // namespace

uint64_t HashOrderingKey(std::string_view business_key) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : business_key) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV-1a 64 prime
  }
  return h;
}

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
