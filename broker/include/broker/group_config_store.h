// GroupConfigStore: consumer groups created with a configuration (`tokimq group create`,
// CreateGroupRequest), kept in the broker's RocksDB under "group_config/<name>". Today a
// configuration holds the group's delivery order (RocketMQ 5's consumeMessageOrderly):
// Orderly groups consume FIFO topics in message-group order, Concurrently groups consume them
// like any other topic. Groups without a record are implicit (created by their first receive)
// and take the default of the entry point they receive through (docs/ordering.md "Delivery
// order of a consumer group": native Orderly, RocketMQ gRPC Concurrently).
//
// Record grammar (versioned, CRC32C over name and value): docs/formats/metadata.md.
//
// Ownership: does not own the rocksdb::DB; the broker opens it and outlives this object.
// Thread-safety: every method may be called from any thread; an in-memory copy of all records
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
#include <string_view>

#include "absl/status/statusor.h"

namespace rocksdb {
class DB;
}

namespace tokimq::broker {

// Persisted values: never renumber. kUnset is never stored; it means "no record" where an
// order is reported.
enum class DeliveryOrder : uint8_t { kUnset = 0, kConcurrently = 1, kOrderly = 2 };

const char* DeliveryOrderName(DeliveryOrder order);  // "concurrently", "orderly", "unset"

struct GroupConfig {
  std::string name;
  DeliveryOrder order = DeliveryOrder::kConcurrently;
  int64_t created_ms = 0;  // set by the store on create, ms since the Unix epoch

  bool operator==(const GroupConfig&) const = default;
};

// kInvalidArgument for a name outside common/names.h's group rule or an order that is neither
// concurrently nor orderly (what Create, Update and Apply check).
absl::Status ValidateGroupConfig(const GroupConfig& config);

// Value encoding of one group record (docs/formats/metadata.md). Decode checks version, length,
// order and CRC32C: kDataLoss naming the key on mismatch.
std::string EncodeGroupConfigValue(const GroupConfig& config);
absl::StatusOr<GroupConfig> DecodeGroupConfigValue(const std::string& name,
                                                   std::string_view value);

class GroupConfigStore {
 public:
  // Loads every "group_config/" record. kDataLoss names the key of a corrupt record.
  static absl::StatusOr<std::unique_ptr<GroupConfigStore>> Open(rocksdb::DB* db);

  // kInvalidArgument for a name outside common/names.h's group rule or an unset order;
  // kAlreadyExists if the group has a record. `now_ms` becomes created_ms.
  absl::Status Create(GroupConfig config, int64_t now_ms);
  // Replaces the order. kNotFound if the group has no record; kInvalidArgument as Create.
  absl::Status Update(const GroupConfig& config);

  // Cluster mode (docs/cluster.md "Consumer groups"): creates or replaces the record with
  // `config` as given, created_ms included (the cluster's copy from etcd). No write when the
  // stored record is equal. kInvalidArgument as Create.
  absl::Status Apply(const GroupConfig& config);

  std::optional<GroupConfig> Get(const std::string& name) const;
  // The stored order of `name`, kUnset without a record.
  DeliveryOrder OrderOf(const std::string& name) const;

 private:
  explicit GroupConfigStore(rocksdb::DB* db) : db_(db) {}
  absl::Status Write(const GroupConfig& config);

  rocksdb::DB* db_;
  mutable std::mutex mu_;  // serialises writes and guards groups_
  std::map<std::string, GroupConfig, std::less<>> groups_;
};

}  // namespace tokimq::broker
