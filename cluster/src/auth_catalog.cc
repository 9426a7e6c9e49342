#include "cluster/auth_catalog.h"

#include <algorithm>
#include <chrono>

#include "cluster/keys.h"
#include "common/logging.h"
#include "common/status.h"
#include "fmt/format.h"

namespace tokimq::cluster {
namespace {

std::string AclUserPrefix(const std::string& cluster, const std::string& access_key) {
  return AclPrefix(cluster) + access_key + "/";
}

absl::Status UserNotFound(const std::string& access_key) {
  return absl::NotFoundError(fmt::format("user '{}' does not exist", access_key));
}

}  // namespace

std::string UsersPrefix(const std::string& cluster) { return ClusterPrefix(cluster) + "users/"; }
std::string UserKey(const std::string& cluster, const std::string& access_key) {
  return UsersPrefix(cluster) + access_key;
}
std::string AclPrefix(const std::string& cluster) { return ClusterPrefix(cluster) + "acl/"; }
std::string AclKey(const std::string& cluster, const std::string& access_key,
                   const std::string& resource) {
  return AclUserPrefix(cluster, access_key) + resource;
}

AuthCatalog::~AuthCatalog() { Stop(); }

absl::StatusOr<int64_t> AuthCatalog::CreateUser(const proto::ClusterUser& user) {
  return CreateUserWithRules(user, {});
}

absl::StatusOr<int64_t> AuthCatalog::CreateUserWithRules(
    const proto::ClusterUser& user, const std::vector<proto::AclRuleInfo>& rules) {
  const std::string key = UserKey(cluster_, user.access_key());
  EtcdTxn txn;
  txn.compares.push_back({key, EtcdTxn::Compare::Kind::kCreateRevisionEquals, 0});
  txn.puts.push_back({key, EncodeValue(user), 0});
  if (rules.empty()) {
    // Rules left by a delete that raced a grant cannot come back with a re-created user.
    txn.delete_prefixes.push_back(AclUserPrefix(cluster_, user.access_key()));
  }
  for (const proto::AclRuleInfo& r : rules) {
    txn.puts.push_back({AclKey(cluster_, user.access_key(), r.resource()), EncodeValue(r), 0});
  }
  TOKIMQ_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(txn));
  if (!r.succeeded) {
    return absl::AlreadyExistsError(fmt::format("user '{}' already exists", user.access_key()));
  }
  return r.revision;
}

absl::StatusOr<int64_t> AuthCatalog::DeleteUser(const std::string& access_key) {
  const std::string key = UserKey(cluster_, access_key);
  TOKIMQ_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, etcd_->Get(key));
  if (!kv) return UserNotFound(access_key);
  EtcdTxn txn;
  txn.compares.push_back({key, EtcdTxn::Compare::Kind::kCreateRevisionEquals, kv->create_revision});
  txn.deletes.push_back(key);
  txn.delete_prefixes.push_back(AclUserPrefix(cluster_, access_key));
  TOKIMQ_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(txn));
  // Lost the race: deleted (or deleted and re-created) by someone else in between.
  if (!r.succeeded) return UserNotFound(access_key);
  return r.revision;
}

absl::StatusOr<int64_t> AuthCatalog::PutRule(const proto::AclRuleInfo& rule) {
  const std::string user_key = UserKey(cluster_, rule.access_key());
  for (int attempt = 0; attempt < 8; ++attempt) {
    TOKIMQ_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, etcd_->Get(user_key));
    if (!kv) return UserNotFound(rule.access_key());
    EtcdTxn txn;
    txn.compares.push_back(
        {user_key, EtcdTxn::Compare::Kind::kCreateRevisionEquals, kv->create_revision});
    txn.puts.push_back(
        {AclKey(cluster_, rule.access_key(), rule.resource()), EncodeValue(rule), 0});
    TOKIMQ_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(txn));
    if (r.succeeded) return r.revision;
  }
  return absl::AbortedError(
      fmt::format("user '{}': too many concurrent changes", rule.access_key()));
}

absl::StatusOr<int64_t> AuthCatalog::DeleteRule(const std::string& access_key,
                                                const std::string& resource) {
  const std::string key = AclKey(cluster_, access_key, resource);
  for (int attempt = 0; attempt < 8; ++attempt) {
    TOKIMQ_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, etcd_->Get(key));
    if (!kv) {
      TOKIMQ_ASSIGN_OR_RETURN(std::optional<KeyValue> user, etcd_->Get(UserKey(cluster_, access_key)));
      if (!user) return UserNotFound(access_key);
      return absl::NotFoundError(
          fmt::format("user '{}' has no rule on '{}'", access_key, resource));
    }
    EtcdTxn txn;
    txn.compares.push_back({key, EtcdTxn::Compare::Kind::kModRevisionEquals, kv->mod_revision});
    txn.deletes.push_back(key);
    TOKIMQ_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(txn));
    if (r.succeeded) return r.revision;
  }
  return absl::AbortedError(fmt::format("user '{}': too many concurrent changes", access_key));
}

void AuthCatalog::Watch(Listener listener) {
  if (watcher_) return;
  listener_ = std::move(listener);
  watcher_ = etcd_->WatchPrefix(ClusterPrefix(cluster_), [this](const WatchBatch& b) { Apply(b); });
}

void AuthCatalog::Stop() {
  if (watcher_) watcher_->Stop();
}

AuthState AuthCatalog::State() const {
  std::lock_guard<std::mutex> lock(mu_);
  return StateLocked();
}

bool AuthCatalog::WaitApplied(int64_t revision, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return applied_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                              [&] { return applied_revision_ >= revision; });
}

AuthState AuthCatalog::StateLocked() const {
  AuthState out;
  out.revision = revision_;
  for (const auto& [ak, user] : users_) {
    AuthState::Entry& e = out.users[ak];
    e.user = user;
    auto rules = rules_.find(ak);
    if (rules == rules_.end()) continue;
    for (const auto& [resource, rule] : rules->second) e.rules.push_back(rule);
  }
  return out;
}

bool AuthCatalog::ApplyEventLocked(const WatchEvent& e) {
  const std::string users = UsersPrefix(cluster_);
  const std::string acl = AclPrefix(cluster_);
  const bool put = e.type == WatchEvent::Type::kPut;
  if (e.kv.key.starts_with(users)) {
    const std::string ak = e.kv.key.substr(users.size());
    proto::ClusterUser u;
    if (!put) {
      users_.erase(ak);
    } else if (absl::Status s = DecodeValue(e.kv.key, e.kv.value, &u); s.ok()) {
      u.set_access_key(ak);  // the key decides
      users_[ak] = u;
    } else {
      TOKIMQ_LOG_WARN("{}", s.ToString());
    }
    return true;
  }
  if (!e.kv.key.starts_with(acl)) return false;
  const std::string rest = e.kv.key.substr(acl.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) return false;
  const std::string ak = rest.substr(0, slash);
  const std::string resource = rest.substr(slash + 1);
  proto::AclRuleInfo rule;
  if (!put) {
    auto it = rules_.find(ak);
    if (it != rules_.end() && it->second.erase(resource) > 0 && it->second.empty()) rules_.erase(it);
  } else if (absl::Status s = DecodeValue(e.kv.key, e.kv.value, &rule); s.ok()) {
    rule.set_access_key(ak);
    rule.set_resource(resource);
    rules_[ak][resource] = rule;
  } else {
    TOKIMQ_LOG_WARN("{}", s.ToString());
  }
  return true;
}

void AuthCatalog::Apply(const WatchBatch& batch) {
  AuthState state;
  bool changed = batch.snapshot;
  // A change batch counts by its events' revisions (the header's may run ahead of them).
  int64_t revision = batch.snapshot ? batch.revision : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (batch.snapshot) {
      users_.clear();
      rules_.clear();
    }
    for (const WatchEvent& e : batch.events) {
      changed = ApplyEventLocked(e) || changed;
      if (!batch.snapshot) revision = std::max(revision, e.kv.mod_revision);
    }
    revision_ = std::max(revision_, revision);
    if (changed) state = StateLocked();
  }
  if (changed && listener_) listener_(state, batch.snapshot);
  {
    std::lock_guard<std::mutex> lock(mu_);
    applied_revision_ = std::max(applied_revision_, revision);
  }
  applied_cv_.notify_all();
}

}  // namespace tokimq::cluster
