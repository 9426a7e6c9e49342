// Broker: the auth store's opening and bootstrap, and the user / ACL administration requests.
#include "broker/auth/auth_store.h"
#include "broker/broker.h"
#include "common/logging.h"
#include "common/status.h"
#include "fmt/format.h"

namespace tokimq::broker {

absl::Status Broker::OpenAuth() {
  TOKIMQ_ASSIGN_OR_RETURN(auth_, auth::AuthStore::Open(db_.get()));
  if (!options_.auth_init_user.empty()) {
    const std::string& spec = options_.auth_init_user;
    const size_t colon = spec.find(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError("auth_init_user must be ACCESS_KEY:SECRET_KEY");
    }
    auth::User user;
    user.access_key = spec.substr(0, colon);
    user.secret_key = spec.substr(colon + 1);
    TOKIMQ_ASSIGN_OR_RETURN(bool created, auth_->CreateInitialUser(user));
    if (created) {
      TOKIMQ_LOG_INFO("auth: created the initial super user '{}'", user.access_key);
    } else {
      TOKIMQ_LOG_INFO("auth: --auth-init-user ignored: {} user(s) exist already",
                      auth_->UserCount());
    }
  }
  if (options_.auth && auth_->UserCount() == 0) {
    TOKIMQ_LOG_WARN(
        "auth is on but no user exists: every request will be refused "
        "(start once with --auth-init-user AK:SK)");
  }
  return absl::OkStatus();
}

absl::Status Broker::HandleAuthAdmin(const proto::Request& req, proto::Response* resp) {
  switch (req.body_case()) {
    case proto::Request::kCreateUser: {
      const auto& r = req.create_user();
      auth::User u;
      u.access_key = r.access_key();
      u.secret_key = r.secret_key();
      u.type = r.super_user() ? auth::UserType::kSuper : auth::UserType::kNormal;
      u.enabled = !r.disabled();
      TOKIMQ_RETURN_IF_ERROR(auth_->CreateUser(u));
      TOKIMQ_LOG_INFO("auth: user '{}' created ({})", u.access_key,
                      r.super_user() ? "super" : "normal");
      resp->mutable_empty();
      return absl::OkStatus();
    }
    case proto::Request::kDeleteUser:
      TOKIMQ_RETURN_IF_ERROR(auth_->DeleteUser(req.delete_user().access_key()));
      TOKIMQ_LOG_INFO("auth: user '{}' deleted", req.delete_user().access_key());
      resp->mutable_empty();
      return absl::OkStatus();
    case proto::Request::kListUsers: {
      auto* out = resp->mutable_list_users();
      for (const auth::User& u : auth_->ListUsers()) {
        proto::UserInfo* info = out->add_users();
        info->set_access_key(u.access_key);
        info->set_super_user(u.type == auth::UserType::kSuper);
        info->set_enabled(u.enabled);
      }
      return absl::OkStatus();
    }
    case proto::Request::kGrantAcl: {
      const proto::AclRuleInfo& r = req.grant_acl().rule();
      auth::AclRule rule;
      TOKIMQ_ASSIGN_OR_RETURN(rule.resource, auth::ParseResourcePattern(r.resource()));
      TOKIMQ_ASSIGN_OR_RETURN(rule.actions, auth::ParseActions(r.actions()));
      rule.decision = r.deny() ? auth::Decision::kDeny : auth::Decision::kAllow;
      TOKIMQ_RETURN_IF_ERROR(auth_->Grant(r.access_key(), rule));
      TOKIMQ_LOG_INFO("auth: {} {} on {} for '{}'", r.deny() ? "deny" : "allow",
                      auth::ActionsToString(rule.actions), rule.resource.ToString(),
                      r.access_key());
      resp->mutable_empty();
      return absl::OkStatus();
    }
    case proto::Request::kRevokeAcl: {
      TOKIMQ_ASSIGN_OR_RETURN(auth::ResourcePattern resource,
                              auth::ParseResourcePattern(req.revoke_acl().resource()));
      TOKIMQ_RETURN_IF_ERROR(auth_->Revoke(req.revoke_acl().access_key(), resource));
      resp->mutable_empty();
      return absl::OkStatus();
    }
    case proto::Request::kListAcl: {
      auto* out = resp->mutable_list_acl();
      for (const auto& [ak, rules] : auth_->ListRules(req.list_acl().access_key())) {
        for (const auth::AclRule& rule : rules) {
          proto::AclRuleInfo* info = out->add_rules();
          info->set_access_key(ak);
          info->set_resource(rule.resource.ToString());
          info->set_actions(auth::ActionsToString(rule.actions));
          info->set_deny(rule.decision == auth::Decision::kDeny);
        }
      }
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("not a user or ACL request");
  }
}

}  // namespace tokimq::broker
