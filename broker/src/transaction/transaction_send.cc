#include "transaction/transaction_send.h"

#include "common/parse_int.h"
#include "fmt/format.h"
#include "transaction/transaction_service.h"

namespace tokimq::broker {

absl::Status CheckTransactional(const proto::SendEntry& e, const TopicConfig& topic) {
  bool tx_topic = topic.type == TopicType::kTransaction;
  if (e.transactional() && !tx_topic) {
    return absl::InvalidArgumentError(fmt::format(
        "topic '{}' is {}: transactional messages need a TRANSACTION topic", topic.name,
        TopicTypeName(topic.type)));
  }
  if (!e.transactional() && tx_topic) {
    return absl::InvalidArgumentError(fmt::format(
        "topic '{}' is TRANSACTION: it takes transactional sends only (send --transactional)",
        topic.name));
  }
  if (!e.transactional() && e.check_immunity_ms() != 0) {
    return absl::InvalidArgumentError("check_immunity_ms is for transactional sends only");
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckImmunityMsOf(const proto::SendEntry& e, int64_t default_ms) {
  int64_t ms = default_ms;
  if (e.check_immunity_ms() != 0) {
    ms = e.check_immunity_ms();
  } else if (auto it = e.properties().find(kCheckImmunityProperty); it != e.properties().end()) {
    int64_t seconds = 0;
    if (!ParseInt64(it->second, &seconds) || seconds > kMaxCheckImmunityMs / 1000) {
      return absl::InvalidArgumentError(fmt::format(
          "property {} must be whole seconds, 1..3600", kCheckImmunityProperty));
    }
    ms = seconds * 1000;
  }
  if (ms < 1 || ms > kMaxCheckImmunityMs) {
    return absl::InvalidArgumentError(
        fmt::format("check immunity {} ms is not within 1 ms .. 1 h", ms));
  }
  return ms;
}

}  // namespace tokimq::broker
