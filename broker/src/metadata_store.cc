#include "broker/metadata_store.h"

#include <rocksdb/db.h>

#include <algorithm>
#include <cctype>

#include "absl/status/status.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/names.h"
#include "fmt/format.h"

namespace tokimq::broker {
namespace {

constexpr char kTopicPrefix[] = "topic/";
constexpr uint8_t kTopicRecordVersion = 1;
// version(1) type(1) queues(4) max_delay_ms(8) retention_ms(8) created_ms(8) crc(4)
constexpr size_t kTopicValueBytes = 1 + 1 + 4 + 8 + 8 + 8 + 4;

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(fmt::format("metadata {}: {}", what, s.ToString()));
}

}  // namespace

const char* TopicTypeName(TopicType type) {
  switch (type) {
    case TopicType::kNormal:
      return "NORMAL";
    case TopicType::kDelay:
      return "DELAY";
    case TopicType::kFifo:
      return "FIFO";
    case TopicType::kTransaction:
      return "TRANSACTION";
  }
  return "UNKNOWN";
}

absl::StatusOr<TopicType> ParseTopicType(const std::string& name) {
  std::string up = name;
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
  if (up == "NORMAL") return TopicType::kNormal;
  if (up == "DELAY") return TopicType::kDelay;
  if (up == "FIFO") return TopicType::kFifo;
  if (up == "TRANSACTION") return TopicType::kTransaction;
  return absl::InvalidArgumentError(
      fmt::format("unknown topic type '{}' (normal, delay, fifo, transaction)", name));
}

absl::Status ValidateTopicConfig(const TopicConfig& c) {
  if (absl::Status s = ValidateTopicName(c.name); !s.ok()) return s;  // common/names.h
  if (c.name.rfind(kSystemTopicPrefix, 0) == 0) {
    return absl::InvalidArgumentError(fmt::format("topic name '{}' is reserved", c.name));
  }
  if (c.queues < 1 || c.queues > kMaxQueues) {
    return absl::InvalidArgumentError(
        fmt::format("queues must be 1..{}, got {}", kMaxQueues, c.queues));
  }
  if (c.max_delay_ms < 0 || c.max_delay_ms > kMaxMaxDelayMs) {
    return absl::InvalidArgumentError(
        fmt::format("max delay must be 0..365d, got {} ms", c.max_delay_ms));
  }
  if (c.retention_ms < 0) return absl::InvalidArgumentError("retention must be >= 0");
  switch (c.type) {
    case TopicType::kNormal:
    case TopicType::kDelay:
    case TopicType::kFifo:
    case TopicType::kTransaction:
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown topic type");
}

std::string EncodeTopicValue(const TopicConfig& c) {
  std::string v;
  v.reserve(kTopicValueBytes);
  v.push_back(static_cast<char>(kTopicRecordVersion));
  v.push_back(static_cast<char>(c.type));
  PutFixed32(&v, static_cast<uint32_t>(c.queues));
  PutFixed64(&v, static_cast<uint64_t>(c.max_delay_ms));
  PutFixed64(&v, static_cast<uint64_t>(c.retention_ms));
  PutFixed64(&v, static_cast<uint64_t>(c.created_ms));
  // The CRC covers the key's topic name too, so a value copied under another key is caught.
  uint32_t crc = crc32c::Value(c.name);
  crc = crc32c::Extend(crc, v.data(), v.size());
  PutFixed32(&v, crc);
  return v;
}

absl::StatusOr<TopicConfig> DecodeTopicValue(const std::string& name, std::string_view value) {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(fmt::format("metadata record topic/{}: {}", name, why));
  };
  if (value.size() != kTopicValueBytes) {
    return corrupt(fmt::format("length {} != {}", value.size(), kTopicValueBytes));
  }
  uint32_t crc = crc32c::Value(name);
  crc = crc32c::Extend(crc, value.data(), kTopicValueBytes - 4);
  if (crc != DecodeFixed32(value.data() + kTopicValueBytes - 4)) return corrupt("CRC mismatch");
  if (static_cast<uint8_t>(value[0]) != kTopicRecordVersion) {
    return corrupt(fmt::format("unknown version {}", static_cast<int>(value[0])));
  }
  TopicConfig c;
  c.name = name;
  uint8_t type = static_cast<uint8_t>(value[1]);
  if (type < 1 || type > 4) return corrupt(fmt::format("unknown type {}", type));
  c.type = static_cast<TopicType>(type);
  Decoder d(value.substr(2));
  uint32_t queues = 0;
  uint64_t max_delay = 0, retention = 0, created = 0;
  if (!d.GetFixed32(&queues) || !d.GetFixed64(&max_delay) || !d.GetFixed64(&retention) ||
      !d.GetFixed64(&created)) {
    return corrupt("short record");
  }
  c.queues = static_cast<int32_t>(queues);
  c.max_delay_ms = static_cast<int64_t>(max_delay);
  c.retention_ms = static_cast<int64_t>(retention);
  c.created_ms = static_cast<int64_t>(created);
  return c;
}

absl::StatusOr<std::unique_ptr<MetadataStore>> MetadataStore::Open(rocksdb::DB* db) {
  std::unique_ptr<MetadataStore> store(new MetadataStore(db));
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(kTopicPrefix); it->Valid() && it->key().starts_with(kTopicPrefix); it->Next()) {
    std::string name = it->key().ToString().substr(sizeof(kTopicPrefix) - 1);
    auto config = DecodeTopicValue(name, std::string_view(it->value().data(), it->value().size()));
    if (!config.ok()) return config.status();
    store->topics_[name] = *config;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  return store;
}

absl::Status MetadataStore::Write(const std::string& key, const std::string* value) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = value ? db_->Put(wo, key, *value) : db_->Delete(wo, key);
  return FromRocks(s, value ? "put " + key : "delete " + key);
}

absl::Status MetadataStore::CreateTopic(const TopicConfig& config) {
  absl::Status valid = ValidateTopicConfig(config);
  if (!valid.ok()) return valid;
  std::lock_guard<std::mutex> lock(mu_);
  if (topics_.count(config.name)) {
    return absl::AlreadyExistsError(fmt::format("topic '{}' already exists", config.name));
  }
  std::string value = EncodeTopicValue(config);
  absl::Status s = Write(kTopicPrefix + config.name, &value);
  if (!s.ok()) return s;
  topics_[config.name] = config;
  return absl::OkStatus();
}

absl::Status MetadataStore::UpdateTopic(const TopicConfig& config) {
  absl::Status valid = ValidateTopicConfig(config);
  if (!valid.ok()) return valid;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = topics_.find(config.name);
  if (it == topics_.end()) {
    return absl::NotFoundError(fmt::format("topic '{}' does not exist", config.name));
  }
  if (it->second.type != config.type) {
    return absl::InvalidArgumentError(fmt::format(
        "topic '{}' is {}; the type cannot change", config.name, TopicTypeName(it->second.type)));
  }
  if (config.queues < it->second.queues) {
    return absl::InvalidArgumentError(fmt::format(
        "topic '{}' has {} queues; the count can only grow", config.name, it->second.queues));
  }
  TopicConfig next = config;
  next.created_ms = it->second.created_ms;
  std::string value = EncodeTopicValue(next);
  absl::Status s = Write(kTopicPrefix + config.name, &value);
  if (!s.ok()) return s;
  it->second = next;
  return absl::OkStatus();
}

absl::Status MetadataStore::DeleteTopic(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = topics_.find(name);
  if (it == topics_.end()) {
    return absl::NotFoundError(fmt::format("topic '{}' does not exist", name));
  }
  absl::Status s = Write(kTopicPrefix + name, nullptr);
  if (!s.ok()) return s;
  topics_.erase(it);
  return absl::OkStatus();
}

std::optional<TopicConfig> MetadataStore::GetTopic(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = topics_.find(name);
  if (it == topics_.end()) return std::nullopt;
  return it->second;
}

std::vector<TopicConfig> MetadataStore::ListTopics() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TopicConfig> out;
  out.reserve(topics_.size());
  for (const auto& [name, c] : topics_) out.push_back(c);
  return out;
}

std::vector<TopicConfig> MetadataStore::ListTopicsPage(const std::string& after, size_t limit,
                                                       size_t* total, bool* more) const {
  std::lock_guard<std::mutex> lock(mu_);
  *total = topics_.size();
  std::vector<TopicConfig> out;
  auto it = after.empty() ? topics_.begin() : topics_.upper_bound(after);
  for (; it != topics_.end() && (limit == 0 || out.size() < limit); ++it) out.push_back(it->second);
  *more = it != topics_.end();
  return out;
}

}  // namespace tokimq::broker
