#include "broker/auth/auth_store.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>

#include "common/coding.h"
#include "common/crc32c.h"
#include "fmt/format.h"

namespace tokimq::broker::auth {
namespace {

constexpr char kUserPrefix[] = "auth/user/";
constexpr char kAclPrefix[] = "auth/acl/";
constexpr uint8_t kRecordVersion = 1;
// version(1) type(1) enabled(1) secret_len(4) secret crc(4)
constexpr size_t kUserFixedBytes = 1 + 1 + 1 + 4 + 4;
// version(1) actions(1) decision(1) crc(4)
constexpr size_t kRuleValueBytes = 1 + 1 + 1 + 4;

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(fmt::format("auth store {}: {}", what, s.ToString()));
}

std::string RuleKey(const std::string& access_key, const std::string& resource) {
  return kAclPrefix + access_key + "\n" + resource;
}

uint32_t RuleCrc(const std::string& access_key, const std::string& resource,
                 std::string_view head) {
  uint32_t crc = crc32c::Value(access_key);
  crc = crc32c::Extend(crc, "\n", 1);
  crc = crc32c::Extend(crc, resource.data(), resource.size());
  return crc32c::Extend(crc, head.data(), head.size());
}

void SortRules(std::vector<AclRule>* rules) {
  std::sort(rules->begin(), rules->end(), [](const AclRule& a, const AclRule& b) {
    return a.resource.ToString() < b.resource.ToString();
  });
}

}  // namespace

std::string EncodeUserValue(const User& u) {
  std::string v;
  v.push_back(static_cast<char>(kRecordVersion));
  v.push_back(static_cast<char>(u.type));
  v.push_back(static_cast<char>(u.enabled ? 1 : 0));
  PutFixed32(&v, static_cast<uint32_t>(u.secret_key.size()));
  v += u.secret_key;
  uint32_t crc = crc32c::Value(u.access_key);
  crc = crc32c::Extend(crc, v.data(), v.size());
  PutFixed32(&v, crc);
  return v;
}

absl::StatusOr<User> DecodeUserValue(const std::string& access_key, std::string_view value) {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(fmt::format("auth record {}{}: {}", kUserPrefix, access_key, why));
  };
  if (value.size() < kUserFixedBytes) return corrupt("short record");
  const uint32_t secret_len = DecodeFixed32(value.data() + 3);
  if (value.size() != kUserFixedBytes + secret_len) {
    return corrupt(fmt::format("length {} != {}", value.size(), kUserFixedBytes + secret_len));
  }
  uint32_t crc = crc32c::Value(access_key);
  crc = crc32c::Extend(crc, value.data(), value.size() - 4);
  if (crc != DecodeFixed32(value.data() + value.size() - 4)) return corrupt("CRC mismatch");
  if (static_cast<uint8_t>(value[0]) != kRecordVersion) return corrupt("unknown version");
  const auto type = static_cast<uint8_t>(value[1]);
  const auto enabled = static_cast<uint8_t>(value[2]);
  if (type < 1 || type > 2 || enabled > 1) return corrupt("bad type or enabled byte");
  User u;
  u.access_key = access_key;
  u.type = static_cast<UserType>(type);
  u.enabled = enabled == 1;
  u.secret_key = std::string(value.substr(7, secret_len));
  return u;
}

std::string EncodeRuleValue(const std::string& access_key, const AclRule& rule) {
  std::string v;
  v.push_back(static_cast<char>(kRecordVersion));
  v.push_back(static_cast<char>(rule.actions));
  v.push_back(static_cast<char>(rule.decision));
  PutFixed32(&v, RuleCrc(access_key, rule.resource.ToString(), v));
  return v;
}

absl::StatusOr<AclRule> DecodeRuleValue(const std::string& access_key, const std::string& resource,
                                        std::string_view value) {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(
        fmt::format("auth record {}{}\\n{}: {}", kAclPrefix, access_key, resource, why));
  };
  if (value.size() != kRuleValueBytes) return corrupt("bad length");
  if (RuleCrc(access_key, resource, value.substr(0, 3)) != DecodeFixed32(value.data() + 3)) {
    return corrupt("CRC mismatch");
  }
  if (static_cast<uint8_t>(value[0]) != kRecordVersion) return corrupt("unknown version");
  AclRule rule;
  rule.actions = static_cast<ActionSet>(value[1]);
  const auto decision = static_cast<uint8_t>(value[2]);
  if (rule.actions == 0 || (rule.actions & ~kAllActions) != 0 || decision < 1 || decision > 2) {
    return corrupt("bad actions or decision");
  }
  rule.decision = static_cast<Decision>(decision);
  absl::StatusOr<ResourcePattern> pattern = ParseResourcePattern(resource);
  if (!pattern.ok()) return corrupt(std::string(pattern.status().message()));
  rule.resource = *pattern;
  return rule;
}

absl::StatusOr<std::unique_ptr<AuthStore>> AuthStore::Open(rocksdb::DB* db) {
  std::unique_ptr<AuthStore> store(new AuthStore(db));
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(kUserPrefix); it->Valid() && it->key().starts_with(kUserPrefix); it->Next()) {
    const std::string ak = it->key().ToString().substr(sizeof(kUserPrefix) - 1);
    absl::StatusOr<User> u = DecodeUserValue(ak, it->value().ToStringView());
    if (!u.ok()) return u.status();
    store->users_[ak].user = *u;
  }
  for (it->Seek(kAclPrefix); it->Valid() && it->key().starts_with(kAclPrefix); it->Next()) {
    const std::string rest = it->key().ToString().substr(sizeof(kAclPrefix) - 1);
    const size_t sep = rest.find('\n');
    const std::string ak = rest.substr(0, sep);
    auto user = store->users_.find(ak);
    if (sep == std::string::npos || user == store->users_.end()) {
      return absl::DataLossError(fmt::format("auth record {}{}: no such user", kAclPrefix, rest));
    }
    absl::StatusOr<AclRule> rule =
        DecodeRuleValue(ak, rest.substr(sep + 1), it->value().ToStringView());
    if (!rule.ok()) return rule.status();
    user->second.rules.push_back(*rule);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  for (auto& [ak, e] : store->users_) SortRules(&e.rules);
  return store;
}

absl::Status AuthStore::CreateUser(const User& user) {
  if (absl::Status s = ValidateAccessKey(user.access_key); !s.ok()) return s;
  if (absl::Status s = ValidateSecretKey(user.secret_key); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  if (users_.count(user.access_key)) {
    return absl::AlreadyExistsError(fmt::format("user '{}' already exists", user.access_key));
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (absl::Status s =
          FromRocks(db_->Put(wo, kUserPrefix + user.access_key, EncodeUserValue(user)), "put user");
      !s.ok()) {
    return s;
  }
  users_[user.access_key].user = user;
  return absl::OkStatus();
}

absl::Status AuthStore::DeleteUser(const std::string& access_key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = users_.find(access_key);
  if (it == users_.end())
    return absl::NotFoundError(fmt::format("user '{}' does not exist", access_key));
  rocksdb::WriteBatch batch;
  batch.Delete(kUserPrefix + access_key);
  for (const AclRule& r : it->second.rules)
    batch.Delete(RuleKey(access_key, r.resource.ToString()));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (absl::Status s = FromRocks(db_->Write(wo, &batch), "delete user"); !s.ok()) return s;
  users_.erase(it);
  return absl::OkStatus();
}

std::optional<User> AuthStore::GetUser(const std::string& access_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = users_.find(access_key);
  if (it == users_.end()) return std::nullopt;
  return it->second.user;
}

std::vector<User> AuthStore::ListUsers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<User> out;
  for (const auto& [ak, e] : users_) out.push_back(e.user);
  return out;
}

size_t AuthStore::UserCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return users_.size();
}

absl::Status AuthStore::Grant(const std::string& access_key, const AclRule& rule) {
  if (rule.actions == 0 || (rule.actions & ~kAllActions) != 0) {
    return absl::InvalidArgumentError("a rule needs at least one of pub, sub, admin");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = users_.find(access_key);
  if (it == users_.end())
    return absl::NotFoundError(fmt::format("user '{}' does not exist", access_key));
  const std::string resource = rule.resource.ToString();
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (absl::Status s =
          FromRocks(db_->Put(wo, RuleKey(access_key, resource), EncodeRuleValue(access_key, rule)),
                    "put rule");
      !s.ok()) {
    return s;
  }
  std::vector<AclRule>& rules = it->second.rules;
  std::erase_if(rules, [&](const AclRule& r) { return r.resource == rule.resource; });
  rules.push_back(rule);
  SortRules(&rules);
  return absl::OkStatus();
}

absl::Status AuthStore::Revoke(const std::string& access_key, const ResourcePattern& resource) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = users_.find(access_key);
  if (it == users_.end())
    return absl::NotFoundError(fmt::format("user '{}' does not exist", access_key));
  std::vector<AclRule>& rules = it->second.rules;
  auto rule = std::find_if(rules.begin(), rules.end(),
                           [&](const AclRule& r) { return r.resource == resource; });
  if (rule == rules.end()) {
    return absl::NotFoundError(
        fmt::format("user '{}' has no rule on '{}'", access_key, resource.ToString()));
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (absl::Status s =
          FromRocks(db_->Delete(wo, RuleKey(access_key, resource.ToString())), "delete rule");
      !s.ok()) {
    return s;
  }
  rules.erase(rule);
  return absl::OkStatus();
}

std::map<std::string, std::vector<AclRule>> AuthStore::ListRules(
    const std::string& access_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::vector<AclRule>> out;
  for (const auto& [ak, e] : users_) {
    if (access_key.empty() || ak == access_key) out[ak] = e.rules;
  }
  return out;
}

absl::StatusOr<bool> AuthStore::CreateInitialUser(const User& user) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!users_.empty()) return false;
  }
  User super = user;
  super.type = UserType::kSuper;
  super.enabled = true;
  if (absl::Status s = CreateUser(super); !s.ok()) return s;
  return true;
}

absl::StatusOr<int> AuthStore::ReplaceAll(const std::vector<UserWithRules>& users) {
  std::map<std::string, Entry> next;
  for (const UserWithRules& u : users) {
    Entry& e = next[u.user.access_key];
    e.user = u.user;
    e.rules = u.rules;
    SortRules(&e.rules);
  }
  std::lock_guard<std::mutex> lock(mu_);
  rocksdb::WriteBatch batch;
  int changed = 0;
  for (const auto& [ak, old] : users_) {
    if (next.count(ak)) continue;
    batch.Delete(kUserPrefix + ak);
    for (const AclRule& r : old.rules) batch.Delete(RuleKey(ak, r.resource.ToString()));
    ++changed;
  }
  for (const auto& [ak, e] : next) {
    auto old = users_.find(ak);
    const std::string user_value = EncodeUserValue(e.user);
    bool differs = old == users_.end() || EncodeUserValue(old->second.user) != user_value;
    if (differs) batch.Put(kUserPrefix + ak, user_value);
    std::map<std::string, std::string> old_rules;  // resource -> value
    if (old != users_.end()) {
      for (const AclRule& r : old->second.rules) {
        old_rules[r.resource.ToString()] = EncodeRuleValue(ak, r);
      }
    }
    for (const AclRule& r : e.rules) {
      const std::string resource = r.resource.ToString();
      const std::string value = EncodeRuleValue(ak, r);
      auto o = old_rules.find(resource);
      if (o == old_rules.end() || o->second != value) {
        batch.Put(RuleKey(ak, resource), value);
        differs = true;
      }
      if (o != old_rules.end()) old_rules.erase(o);
    }
    for (const auto& [resource, value] : old_rules) {
      batch.Delete(RuleKey(ak, resource));
      differs = true;
    }
    if (differs) ++changed;
  }
  if (batch.Count() > 0) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    if (absl::Status s = FromRocks(db_->Write(wo, &batch), "replace"); !s.ok()) return s;
  }
  users_ = std::move(next);
  return changed;
}

bool AuthStore::Allows(const std::string& access_key, const Resource& resource,
                       Action action) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = users_.find(access_key);
  if (it == users_.end() || !it->second.user.enabled) return false;
  if (it->second.user.type == UserType::kSuper) return true;
  return RulesAllow(it->second.rules, resource, action);
}

}  // namespace tokimq::broker::auth
