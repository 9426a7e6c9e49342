// MetadataStore: topic configuration kept in the broker's RocksDB (shared with the
// ConsumerService, which owns the "group/" key prefix; this class owns "topic/").
//
// Record grammar (versioned, CRC32C-protected value): docs/formats/metadata.md.
//
// Ownership: does not own the rocksdb::DB; the broker opens it and outlives this object.
// Thread-safety: every method may be called from any thread; an in-memory copy of all topics
// (loaded at Open, kept in step with every write) serves reads without touching RocksDB.
// Durability: every write uses WriteOptions::sync = true; a method returns OK only after the
// change is durable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rocksdb {
class DB;
}

namespace tokimq::broker {

// Persisted values: never renumber.
enum class TopicType : uint8_t { kNormal = 1, kDelay = 2, kFifo = 3, kTransaction = 4 };

inline constexpr int64_t kDefaultMaxDelayMs = 3LL * 24 * 3600 * 1000;  // 3 days
inline constexpr int64_t kMaxMaxDelayMs = 365LL * 24 * 3600 * 1000;    // 365 days
inline constexpr int32_t kDefaultQueues = 8;
inline constexpr int32_t kMaxQueues = 1024;

struct TopicConfig {
  std::string name;
  TopicType type = TopicType::kNormal;
  int32_t queues = kDefaultQueues;
  int64_t max_delay_ms = kDefaultMaxDelayMs;
  int64_t retention_ms = 0;  // 0: the broker's default retention
  int64_t created_ms = 0;

  bool operator==(const TopicConfig&) const = default;
};

const char* TopicTypeName(TopicType type);
// "normal" / "NORMAL" / "delay" / ... ; kInvalidArgument otherwise.
absl::StatusOr<TopicType> ParseTopicType(const std::string& name);

// Checks name (1..127 of [A-Za-z0-9._-], not a reserved system name), queues (1..1024), max
// delay (0..365 d), retention (>= 0). kInvalidArgument naming the offending field.
absl::Status ValidateTopicConfig(const TopicConfig& config);

// Value encoding of one topic record (docs/formats/metadata.md). Decode checks version, length
// and CRC32C: kDataLoss on mismatch.
std::string EncodeTopicValue(const TopicConfig& config);
absl::StatusOr<TopicConfig> DecodeTopicValue(const std::string& name, std::string_view value);

class MetadataStore {
 public:
  // Loads every "topic/" record. kDataLoss names the key of a corrupt record.
  static absl::StatusOr<std::unique_ptr<MetadataStore>> Open(rocksdb::DB* db);

  // kAlreadyExists if the topic exists; kInvalidArgument per ValidateTopicConfig.
  absl::Status CreateTopic(const TopicConfig& config);
  // Replaces queues / max delay / retention. kNotFound; kInvalidArgument if the type changes or
  // the queue count shrinks (messages already sit in the higher queues).
  absl::Status UpdateTopic(const TopicConfig& config);
  // kNotFound if absent. Stored messages stay until retention removes them.
  absl::Status DeleteTopic(const std::string& name);

  std::optional<TopicConfig> GetTopic(const std::string& name) const;
  // Sorted by name.
  std::vector<TopicConfig> ListTopics() const;
  // Up to `limit` topics (0: all) whose names sort after `after` ("": from the first), sorted;
  // *total gets the number of topics (all of them). *more: topics remain after the last one.
  std::vector<TopicConfig> ListTopicsPage(const std::string& after, size_t limit, size_t* total,
                                          bool* more) const;

 private:
  explicit MetadataStore(rocksdb::DB* db) : db_(db) {}
  absl::Status Write(const std::string& key, const std::string* value);

  rocksdb::DB* db_;
  mutable std::mutex mu_;  // serialises writes and guards topics_
  std::map<std::string, TopicConfig> topics_;
};

}  // namespace tokimq::broker
