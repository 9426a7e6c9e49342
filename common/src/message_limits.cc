#include "common/message_limits.h"

#include <string>
#include <utility>

#include "fmt/format.h"

namespace tokimq {
namespace {

// A property name as shown in an error: at most 64 bytes of it.
std::string Shown(std::string_view name) {
  if (name.size() <= 64) return std::string(name);
  return fmt::format("{}... ({} bytes)", name.substr(0, 64), name.size());
}

}  // namespace

MessageHeaderCheck::MessageHeaderCheck(std::string_view key, std::string_view tag) {
  header_bytes_ = key.size() + tag.size();
  if (key.size() > kMaxKeyBytes) {
    Fail(HeaderLimit::kKey,
         absl::InvalidArgumentError(fmt::format("key of {} bytes exceeds the limit of {} bytes",
                                                key.size(), kMaxKeyBytes)));
  }
  if (tag.size() > kMaxTagBytes) {
    Fail(HeaderLimit::kTag,
         absl::InvalidArgumentError(fmt::format("tag of {} bytes exceeds the limit of {} bytes",
                                                tag.size(), kMaxTagBytes)));
  }
}

void MessageHeaderCheck::AddProperty(std::string_view name, std::string_view value) {
  header_bytes_ += name.size() + value.size();
  if (name.starts_with(kEndpointPropertyPrefix)) {
    ++endpoint_properties_;
  } else {
    ++properties_;
  }
  if (!failed_ok()) return;
  if (name.empty()) {
    Fail(HeaderLimit::kPropertyName, absl::InvalidArgumentError("property with an empty name"));
  } else if (name.size() > kMaxPropertyNameBytes) {
    Fail(HeaderLimit::kPropertyName,
         absl::InvalidArgumentError(
             fmt::format("property name '{}' of {} bytes exceeds the limit of {} bytes",
                         Shown(name), name.size(), kMaxPropertyNameBytes)));
  } else if (value.size() > kMaxPropertyValueBytes) {
    Fail(HeaderLimit::kPropertyValue,
         absl::InvalidArgumentError(
             fmt::format("value of property '{}' of {} bytes exceeds the limit of {} bytes",
                         Shown(name), value.size(), kMaxPropertyValueBytes)));
  }
}

absl::Status MessageHeaderCheck::Finish(HeaderLimit* which) const {
  HeaderLimit limit = failed_;
  absl::Status s = status_;
  if (limit == HeaderLimit::kNone) {
    if (properties_ > kMaxProperties) {
      limit = HeaderLimit::kPropertyCount;
      s = absl::InvalidArgumentError(fmt::format(
          "{} properties exceed the limit of {} per message", properties_, kMaxProperties));
    } else if (endpoint_properties_ > kMaxEndpointProperties) {
      limit = HeaderLimit::kPropertyCount;
      s = absl::InvalidArgumentError(
          fmt::format("{} properties named {}* exceed the limit of {} per message",
                      endpoint_properties_, kEndpointPropertyPrefix, kMaxEndpointProperties));
    } else if (header_bytes_ > kMaxHeaderBytes) {
      limit = HeaderLimit::kHeaderBytes;
      s = absl::InvalidArgumentError(
          fmt::format("key, tag and properties of {} bytes together exceed the limit of {} "
                      "bytes",
                      header_bytes_, kMaxHeaderBytes));
    }
  }
  if (which != nullptr) *which = limit;
  return s;
}

void MessageHeaderCheck::Fail(HeaderLimit limit, absl::Status s) {
  if (failed_ != HeaderLimit::kNone) return;  // the first one is reported
  failed_ = limit;
  status_ = std::move(s);
}

}  // namespace tokimq
