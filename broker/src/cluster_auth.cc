#include "cluster_auth.h"

#include "broker/auth/auth_store.h"
#include "broker/broker.h"
#include "cluster/auth_catalog.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "fmt/format.h"
#include "proto/status.h"

namespace tokimq::broker {
namespace {

// How long a user / ACL change waits for this broker's own watch to apply it (real time).
constexpr int64_t kApplyWaitMs = 5'000;

proto::AclRuleInfo RuleInfo(const std::string& access_key, const auth::AclRule& rule) {
  proto::AclRuleInfo info;
  info.set_access_key(access_key);
  info.set_resource(rule.resource.ToString());
  info.set_actions(auth::ActionsToString(rule.actions));
  info.set_deny(rule.decision == auth::Decision::kDeny);
  return info;
}

// A rule as the broker's store keeps it, from the wire or from etcd.
absl::StatusOr<auth::AclRule> RuleOf(const proto::AclRuleInfo& info) {
  auth::AclRule rule;
  TOKIMQ_ASSIGN_OR_RETURN(rule.resource, auth::ParseResourcePattern(info.resource()));
  TOKIMQ_ASSIGN_OR_RETURN(rule.actions, auth::ParseActions(info.actions()));
  if (rule.actions == 0) {
    return absl::InvalidArgumentError("a rule needs at least one of pub, sub, admin");
  }
  rule.decision = info.deny() ? auth::Decision::kDeny : auth::Decision::kAllow;
  return rule;
}

auth::User UserOf(const proto::ClusterUser& u) {
  auth::User user;
  user.access_key = u.access_key();
  user.secret_key = u.secret_key();
  user.type = u.super_user() ? auth::UserType::kSuper : auth::UserType::kNormal;
  user.enabled = u.enabled();
  return user;
}

}  // namespace

ClusterAuth::ClusterAuth(Broker* broker, cluster::EtcdClient* etcd, std::string cluster)
    : broker_(broker),
      cluster_(std::move(cluster)),
      catalog_(std::make_unique<cluster::AuthCatalog>(etcd, cluster_)) {}

ClusterAuth::~ClusterAuth() { Stop(); }

void ClusterAuth::Start() {
  catalog_->Watch(
      [this](const cluster::AuthState& state, bool snapshot) { OnState(state, snapshot); });
}

void ClusterAuth::Stop() { catalog_->Stop(); }

bool ClusterAuth::Intercept(const proto::Request& req, proto::Response* resp) {
  absl::Status s;
  switch (req.body_case()) {
    case proto::Request::kCreateUser:
      s = CreateUser(req.create_user());
      break;
    case proto::Request::kDeleteUser: {
      const std::string& ak = req.delete_user().access_key();
      s = Applied(catalog_->DeleteUser(ak), fmt::format("user '{}' deleted", ak));
      break;
    }
    case proto::Request::kGrantAcl:
      s = Grant(req.grant_acl().rule());
      break;
    case proto::Request::kRevokeAcl:
      s = Revoke(req.revoke_acl());
      break;
    default:
      return false;
  }
  if (s.ok()) {
    resp->mutable_empty();
  } else {
    resp->clear_body();
    wire::ToProto(s, resp->mutable_status());
  }
  return true;
}

absl::Status ClusterAuth::CreateUser(const proto::CreateUserRequest& req) {
  TOKIMQ_RETURN_IF_ERROR(auth::ValidateAccessKey(req.access_key()));
  TOKIMQ_RETURN_IF_ERROR(auth::ValidateSecretKey(req.secret_key()));
  proto::ClusterUser u;
  u.set_access_key(req.access_key());
  u.set_secret_key(req.secret_key());
  u.set_super_user(req.super_user());
  u.set_enabled(!req.disabled());
  u.set_created_ms(broker_->clock()->NowMs());
  return Applied(catalog_->CreateUser(u),
                 fmt::format("user '{}' created ({})", u.access_key(),
                             u.super_user() ? "super" : "normal"));
}

absl::Status ClusterAuth::Grant(const proto::AclRuleInfo& req) {
  TOKIMQ_ASSIGN_OR_RETURN(auth::AclRule rule, RuleOf(req));
  // Stored normalised, as the local store prints it: one etcd key per (user, resource).
  const proto::AclRuleInfo info = RuleInfo(req.access_key(), rule);
  return Applied(catalog_->PutRule(info),
                 fmt::format("{} {} on {} for '{}'", info.deny() ? "deny" : "allow",
                             info.actions(), info.resource(), info.access_key()));
}

absl::Status ClusterAuth::Revoke(const proto::RevokeAclRequest& req) {
  TOKIMQ_ASSIGN_OR_RETURN(auth::ResourcePattern resource,
                          auth::ParseResourcePattern(req.resource()));
  return Applied(catalog_->DeleteRule(req.access_key(), resource.ToString()),
                 fmt::format("rule on {} of '{}' revoked", resource.ToString(), req.access_key()));
}

absl::Status ClusterAuth::Applied(const absl::StatusOr<int64_t>& revision,
                                  const std::string& what) {
  if (!revision.ok()) return revision.status();
  TOKIMQ_LOG_INFO("cluster {}: auth: {} (etcd revision {})", cluster_, what, *revision);
  if (!catalog_->WaitApplied(*revision, kApplyWaitMs)) {
    TOKIMQ_LOG_WARN("cluster {}: auth change at etcd revision {} is committed but this broker's "
                    "watch has not applied it after {} ms",
                    cluster_, *revision, kApplyWaitMs);
  }
  return absl::OkStatus();
}

void ClusterAuth::OnState(const cluster::AuthState& state, bool snapshot) {
  if (snapshot && state.users.empty()) {
    CopyLocalUsersToCluster();
    return;
  }
  std::vector<auth::AuthStore::UserWithRules> users;
  users.reserve(state.users.size());
  for (const auto& [ak, e] : state.users) {
    auth::AuthStore::UserWithRules u;
    u.user = UserOf(e.user);
    if (!auth::ValidateAccessKey(u.user.access_key).ok() ||
        !auth::ValidateSecretKey(u.user.secret_key).ok()) {
      TOKIMQ_LOG_WARN("cluster {}: etcd user '{}' is not valid: skipped", cluster_, ak);
      continue;
    }
    for (const proto::AclRuleInfo& info : e.rules) {
      absl::StatusOr<auth::AclRule> rule = RuleOf(info);
      if (!rule.ok()) {
        TOKIMQ_LOG_WARN("cluster {}: etcd rule {} of '{}' skipped: {}", cluster_, info.resource(),
                        ak, rule.status().ToString());
        continue;
      }
      u.rules.push_back(*rule);
    }
    users.push_back(std::move(u));
  }
  absl::StatusOr<int> changed = broker_->auth_store()->ReplaceAll(users);
  if (!changed.ok()) {
    TOKIMQ_LOG_ERROR("cluster {}: cannot apply the cluster's users locally: {}", cluster_,
                     changed.status().ToString());
  } else if (*changed > 0) {
    TOKIMQ_LOG_INFO("cluster {}: auth: {} user(s) changed from etcd (revision {}), {} in all",
                    cluster_, *changed, state.revision, users.size());
  }
}

void ClusterAuth::CopyLocalUsersToCluster() {
  const auth::AuthStore* store = broker_->auth_store();
  const std::vector<auth::User> local = store->ListUsers();
  if (local.empty()) return;
  const auto rules = store->ListRules("");
  int copied = 0;
  for (const auth::User& user : local) {
    proto::ClusterUser u;
    u.set_access_key(user.access_key);
    u.set_secret_key(user.secret_key);
    u.set_super_user(user.type == auth::UserType::kSuper);
    u.set_enabled(user.enabled);
    u.set_created_ms(broker_->clock()->NowMs());
    std::vector<proto::AclRuleInfo> infos;
    if (auto it = rules.find(user.access_key); it != rules.end()) {
      for (const auth::AclRule& r : it->second) infos.push_back(RuleInfo(user.access_key, r));
    }
    absl::StatusOr<int64_t> r = catalog_->CreateUserWithRules(u, infos);
    if (r.ok()) {
      ++copied;
    } else if (!absl::IsAlreadyExists(r.status())) {
      TOKIMQ_LOG_WARN("cluster {}: cannot copy local user '{}' to etcd: {}", cluster_,
                      user.access_key, r.status().ToString());
    }
  }
  TOKIMQ_LOG_INFO("cluster {}: etcd had no user: copied {} of this broker's {} user(s) to it",
                  cluster_, copied, local.size());
}

}  // namespace tokimq::broker
