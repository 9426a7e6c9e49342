#include "tokimq/auth_commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "client/admin.h"

namespace tokimq::cli {
namespace {

struct AuthArgs {
  std::string access_key;
  std::string secret_key;
  bool super_user = false;
  bool disabled = false;
  std::string resource;
  std::string actions;
  bool deny = false;
};

absl::Status UserCreate(const client::ClientOptions& o, const AuthArgs& a) {
  proto::CreateUserRequest req;
  req.set_access_key(a.access_key);
  req.set_secret_key(a.secret_key);
  req.set_super_user(a.super_user);
  req.set_disabled(a.disabled);
  if (absl::Status s = client::AdminClient(o).CreateUser(req); !s.ok()) return s;
  std::printf("created user %s (%s)\n", a.access_key.c_str(), a.super_user ? "super" : "normal");
  return absl::OkStatus();
}

absl::Status UserDelete(const client::ClientOptions& o, const AuthArgs& a) {
  if (absl::Status s = client::AdminClient(o).DeleteUser(a.access_key); !s.ok()) return s;
  std::printf("deleted user %s\n", a.access_key.c_str());
  return absl::OkStatus();
}

absl::Status UserList(const client::ClientOptions& o) {
  auto users = client::AdminClient(o).ListUsers();
  if (!users.ok()) return users.status();
  for (const proto::UserInfo& u : *users) {  // the broker never sends secrets
    std::printf("%s type=%s enabled=%s\n", u.access_key().c_str(),
                u.super_user() ? "super" : "normal", u.enabled() ? "true" : "false");
  }
  return absl::OkStatus();
}

absl::Status AclGrant(const client::ClientOptions& o, const AuthArgs& a) {
  proto::AclRuleInfo rule;
  rule.set_access_key(a.access_key);
  rule.set_resource(a.resource);
  rule.set_actions(a.actions);
  rule.set_deny(a.deny);
  if (absl::Status s = client::AdminClient(o).GrantAcl(rule); !s.ok()) return s;
  std::printf("%s %s on %s for %s\n", a.deny ? "denied" : "allowed", a.actions.c_str(),
              a.resource.c_str(), a.access_key.c_str());
  return absl::OkStatus();
}

absl::Status AclRevoke(const client::ClientOptions& o, const AuthArgs& a) {
  if (absl::Status s = client::AdminClient(o).RevokeAcl(a.access_key, a.resource); !s.ok()) {
    return s;
  }
  std::printf("revoked %s for %s\n", a.resource.c_str(), a.access_key.c_str());
  return absl::OkStatus();
}

absl::Status AclList(const client::ClientOptions& o, const AuthArgs& a) {
  auto rules = client::AdminClient(o).ListAcl(a.access_key);
  if (!rules.ok()) return rules.status();
  for (const proto::AclRuleInfo& r : *rules) {
    std::printf("%s %s %s %s\n", r.access_key().c_str(), r.resource().c_str(), r.actions().c_str(),
                r.deny() ? "deny" : "allow");
  }
  return absl::OkStatus();
}

}  // namespace

void AddAuthCommands(CLI::App* app, client::ClientOptions* opts,
                     std::function<absl::Status()>* action) {
  app->add_option("--access-key", opts->access_key, "access key of a broker with --auth")
      ->envname("TOKIMQ_ACCESS_KEY");
  app->add_option("--secret-key", opts->secret_key,
                  "secret key (prefer the environment: command lines are visible to other users)")
      ->envname("TOKIMQ_SECRET_KEY");
  app->add_flag("--tls", opts->tls, "connect with TLS (broker started with --tls-cert)");
  app->add_option("--tls-ca", opts->tls_ca_file,
                  "PEM CA certificate(s) to trust for --tls (default: the system's)");
  auto args = std::make_shared<AuthArgs>();  // lives as long as the callbacks that use it

  CLI::App* user = app->add_subcommand("user", "create, delete, list users (docs/security.md)");
  user->require_subcommand(1);
  CLI::App* ucreate = user->add_subcommand("create", "create a user");
  ucreate->add_option("--access-key", args->access_key, "the new user's access key")->required();
  ucreate->add_option("--secret-key", args->secret_key, "the new user's secret key")->required();
  ucreate->add_flag("--super", args->super_user, "super user: bypasses ACL rules");
  ucreate->add_flag("--disabled", args->disabled, "create disabled (refused everything)");
  ucreate->callback([=] { *action = [=] { return UserCreate(*opts, *args); }; });
  CLI::App* udel = user->add_subcommand("delete", "delete a user and its ACL rules");
  udel->add_option("--access-key", args->access_key, "the user's access key")->required();
  udel->callback([=] { *action = [=] { return UserDelete(*opts, *args); }; });
  user->add_subcommand("list", "list users (never prints secrets)")->callback([=] {
    *action = [=] { return UserList(*opts); };
  });

  CLI::App* acl = app->add_subcommand("acl", "grant, revoke, list ACL rules (docs/security.md)");
  acl->require_subcommand(1);
  CLI::App* grant = acl->add_subcommand("grant", "add or replace a user's rule on a resource");
  grant->add_option("--user", args->access_key, "access key")->required();
  grant
      ->add_option("--resource", args->resource,
                   "topic:NAME, topic:PREFIX*, group:NAME, group:PREFIX* or *")
      ->required();
  grant->add_option("--actions", args->actions, "pub,sub,admin (any subset)")->required();
  grant->add_flag("--deny", args->deny, "a deny rule (default: allow)");
  grant->callback([=] { *action = [=] { return AclGrant(*opts, *args); }; });
  CLI::App* revoke = acl->add_subcommand("revoke", "remove a user's rule on a resource");
  revoke->add_option("--user", args->access_key, "access key")->required();
  revoke->add_option("--resource", args->resource, "the rule's resource")->required();
  revoke->callback([=] { *action = [=] { return AclRevoke(*opts, *args); }; });
  CLI::App* list = acl->add_subcommand("list", "list rules");
  list->add_option("--user", args->access_key, "only this user's rules");
  list->callback([=] { *action = [=] { return AclList(*opts, *args); }; });
}

}  // namespace tokimq::cli
