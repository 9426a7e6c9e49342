// The console's message views and actions: the DLQ browser, its resend, message lookup by id or
// key, recall. Reads go to the broker's MessageStore directly (no lease, no group progress is
// touched); resend and recall go through Broker::Handle, so they take the same checks as a
// native Send / Recall (topic exists, sizes, names; recall handle rules).
// Thread-safety: as Broker::Handle and MessageStore reads (any thread).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "commitlog/message.h"
#include "nlohmann/json.hpp"

namespace tokimq::broker {
class Broker;
}

namespace tokimq::broker::console {

// Body bytes shown per message (the rest is cut; body_bytes says how many there were).
inline constexpr size_t kBodyPreviewBytes = 256;
// DLQ page size at most, and message lookup's scan: the newest this many entries of every queue
// of every topic (and of the timer topic, for scheduled messages). The broker has no index by
// id or key (RocketMQ's IndexFile): the lookup is a bounded scan, documented in docs/console.md.
inline constexpr int kMaxDlqPage = 200;
inline constexpr int kLookupScanPerQueue = 2000;
inline constexpr int kMaxLookupResults = 50;

// One message as JSON: id, topic, queue_id, queue_offset, key, tag, born_ms, store_ms,
// properties (all of them), body_bytes, body_preview (the first kBodyPreviewBytes, bytes outside
// printable ASCII shown as '.').
nlohmann::json MessageJson(const Message& m);

// The DLQ page of `group`: {"group", "topic", "min_offset", "max_offset", "messages": [...]},
// messages from queue offset `from` (-1: the newest `limit`), at most `limit` (1..kMaxDlqPage).
// kInvalidArgument for a group name the name rule refuses or a bad limit.
absl::StatusOr<nlohmann::json> DlqJson(const Broker& broker, const std::string& group,
                                       int64_t from, int limit);

// Sends the DLQ message at `offset` of `group`'s DLQ to the topic it came from (its
// ORIGIN_TOPIC), now, with its body, key, tag, message group and user properties (not the
// broker's own: delivery attempt, origin, timer and transaction keys), as a new message with a
// new id. The DLQ copy stays (as RocketMQ's dashboard resend). Answers {"message_id", "topic"}.
// kNotFound: no message at that offset; errors of Send otherwise.
absl::StatusOr<nlohmann::json> ResendFromDlq(Broker& broker, const std::string& group,
                                             int64_t offset);

// Messages whose id (UNIQ_KEY) equals `id`, or whose KEYS contain `key` (space separated), among
// the newest kLookupScanPerQueue entries of each queue of each topic, DLQ topic and the timer
// topic: {"messages": [...], "scanned": N}. A scheduled message (a timer-topic record whose
// deliver time is still ahead) is shown with its real topic, "scheduled": true, its deliver_ms
// and its recall handle (also after a recall, which the lookup cannot tell: the recall then
// answers 409).
absl::StatusOr<nlohmann::json> LookupJson(Broker& broker, const std::string& id,
                                          const std::string& key);

// Recalls a scheduled message (Broker::Handle Recall): OK answers {"recalled": true}.
absl::StatusOr<nlohmann::json> RecallJson(Broker& broker, const std::string& handle);

}  // namespace tokimq::broker::console
