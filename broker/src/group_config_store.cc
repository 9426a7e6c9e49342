#include "broker/group_config_store.h"

#include <rocksdb/db.h>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/names.h"
#include "fmt/format.h"

namespace tokimq::broker {
namespace {

constexpr char kGroupConfigPrefix[] = "group_config/";
constexpr uint8_t kGroupRecordVersion = 1;
// version(1) order(1) created_ms(8) crc(4)
constexpr size_t kGroupValueBytes = 1 + 1 + 8 + 4;

}  // namespace

absl::Status ValidateGroupConfig(const GroupConfig& c) {
  if (absl::Status s = ValidateGroupName(c.name); !s.ok()) return s;  // common/names.h
  if (c.order != DeliveryOrder::kConcurrently && c.order != DeliveryOrder::kOrderly) {
    return absl::InvalidArgumentError("delivery order must be concurrently or orderly");
  }
  return absl::OkStatus();
}

const char* DeliveryOrderName(DeliveryOrder order) {
  switch (order) {
    case DeliveryOrder::kConcurrently: return "concurrently";
    case DeliveryOrder::kOrderly: return "orderly";
    case DeliveryOrder::kUnset: break;
  }
  return "unset";
}

std::string EncodeGroupConfigValue(const GroupConfig& c) {
  std::string v;
  v.reserve(kGroupValueBytes);
  v.push_back(static_cast<char>(kGroupRecordVersion));
  v.push_back(static_cast<char>(c.order));
  PutFixed64(&v, static_cast<uint64_t>(c.created_ms));
  // The CRC covers the key's group name too, so a value copied under another key is caught.
  uint32_t crc = crc32c::Value(c.name);
  crc = crc32c::Extend(crc, v.data(), v.size());
  PutFixed32(&v, crc);
  return v;
}

absl::StatusOr<GroupConfig> DecodeGroupConfigValue(const std::string& name,
                                                   std::string_view value) {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(fmt::format("metadata record {}{}: {}", kGroupConfigPrefix,
                                           QuoteName(name), why));
  };
  if (value.size() != kGroupValueBytes) {
    return corrupt(fmt::format("length {} != {}", value.size(), kGroupValueBytes));
  }
  uint32_t crc = crc32c::Value(name);
  crc = crc32c::Extend(crc, value.data(), kGroupValueBytes - 4);
  if (crc != DecodeFixed32(value.data() + kGroupValueBytes - 4)) return corrupt("CRC mismatch");
  if (static_cast<uint8_t>(value[0]) != kGroupRecordVersion) {
    return corrupt(fmt::format("unknown version {}", static_cast<int>(value[0])));
  }
  const auto order = static_cast<uint8_t>(value[1]);
  if (order < 1 || order > 2) return corrupt(fmt::format("unknown delivery order {}", order));
  GroupConfig c;
  c.name = name;
  c.order = static_cast<DeliveryOrder>(order);
  c.created_ms = static_cast<int64_t>(DecodeFixed64(value.data() + 2));
  return c;
}

absl::StatusOr<std::unique_ptr<GroupConfigStore>> GroupConfigStore::Open(rocksdb::DB* db) {
  std::unique_ptr<GroupConfigStore> store(new GroupConfigStore(db));
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(kGroupConfigPrefix); it->Valid() && it->key().starts_with(kGroupConfigPrefix);
       it->Next()) {
    std::string name = it->key().ToString().substr(sizeof(kGroupConfigPrefix) - 1);
    absl::StatusOr<GroupConfig> c =
        DecodeGroupConfigValue(name, std::string_view(it->value().data(), it->value().size()));
    if (!c.ok()) return c.status();
    store->groups_[name] = *c;
  }
  if (!it->status().ok()) {
    return absl::InternalError(fmt::format("metadata scan: {}", it->status().ToString()));
  }
  return store;
}

absl::Status GroupConfigStore::Write(const GroupConfig& c) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = db_->Put(wo, kGroupConfigPrefix + c.name, EncodeGroupConfigValue(c));
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(fmt::format("metadata put {}{}: {}", kGroupConfigPrefix, c.name,
                                         s.ToString()));
}

absl::Status GroupConfigStore::Create(GroupConfig config, int64_t now_ms) {
  if (absl::Status s = ValidateGroupConfig(config); !s.ok()) return s;
  config.created_ms = now_ms;
  std::lock_guard<std::mutex> lock(mu_);
  if (groups_.count(config.name)) {
    return absl::AlreadyExistsError(fmt::format("group '{}' already exists", config.name));
  }
  if (absl::Status s = Write(config); !s.ok()) return s;
  groups_[config.name] = config;
  return absl::OkStatus();
}

absl::Status GroupConfigStore::Update(const GroupConfig& config) {
  if (absl::Status s = ValidateGroupConfig(config); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(config.name);
  if (it == groups_.end()) {
    return absl::NotFoundError(fmt::format(
        "subscription group [{}] does not exist (create it with `tokimq group create`)",
        config.name));
  }
  GroupConfig next = config;
  next.created_ms = it->second.created_ms;
  if (absl::Status s = Write(next); !s.ok()) return s;
  it->second = next;
  return absl::OkStatus();
}

absl::Status GroupConfigStore::Apply(const GroupConfig& config) {
  if (absl::Status s = ValidateGroupConfig(config); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(config.name);
  if (it != groups_.end() && it->second == config) return absl::OkStatus();
  if (absl::Status s = Write(config); !s.ok()) return s;
  groups_[config.name] = config;
  return absl::OkStatus();
}

std::optional<GroupConfig> GroupConfigStore::Get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(name);
  if (it == groups_.end()) return std::nullopt;
  return it->second;
}

DeliveryOrder GroupConfigStore::OrderOf(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(name);
  return it == groups_.end() ? DeliveryOrder::kUnset : it->second.order;
}

}  // namespace tokimq::broker
