#include "tokimq/group_commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "client/admin.h"
#include "common/names.h"

namespace tokimq::cli {
namespace {

struct GroupArgs {
  std::string name;
  bool orderly = false;
  bool concurrently = false;
};

const char* OrderName(proto::DeliveryOrder order) {
  switch (order) {
    case proto::ORDERLY: return "orderly";
    case proto::CONCURRENTLY: return "concurrently";
    default: return "unset";
  }
}

void PrintGroup(const char* verb, const proto::GroupConfig& g) {
  std::printf("%sgroup %s order=%s created_ms=%lld\n", verb, g.name().c_str(),
              OrderName(g.delivery_order()), static_cast<long long>(g.created_ms()));
}

proto::GroupConfig ToGroup(const GroupArgs& a) {
  proto::GroupConfig g;
  g.set_name(a.name);
  g.set_delivery_order(a.orderly ? proto::ORDERLY : proto::CONCURRENTLY);
  return g;
}

}  // namespace

void AddGroupCommands(CLI::App* app, client::ClientOptions* opts,
                      std::function<absl::Status()>* action) {
  auto args = std::make_shared<GroupArgs>();  // lives as long as the callbacks that use it
  const CLI::Validator group_name(
      [](std::string& v) -> std::string {
        absl::Status s = ValidateGroupName(v);
        return s.ok() ? std::string() : std::string(s.message());
      },
      "GROUP");
  CLI::App* group = app->add_subcommand(
      "group", "create, update, describe consumer groups (delivery order: docs/ordering.md)");
  group->require_subcommand(1);
  auto add_order = [&](CLI::App* cmd) {
    cmd->add_option("--name", args->name, "group name")->required()->check(group_name);
    CLI::Option* o = cmd->add_flag(
        "--orderly", args->orderly,
        "consume FIFO topics in message-group order (RocketMQ's consumeMessageOrderly)");
    CLI::Option* c = cmd->add_flag("--concurrently", args->concurrently,
                                   "consume FIFO topics like any other topic (the default)");
    o->excludes(c);
  };
  CLI::App* create = group->add_subcommand("create", "create a group's configuration");
  add_order(create);
  create->callback([=] {
    *action = [=]() -> absl::Status {
      auto g = client::AdminClient(*opts).CreateGroup(ToGroup(*args));
      if (!g.ok()) return g.status();
      PrintGroup("created ", *g);
      return absl::OkStatus();
    };
  });
  CLI::App* update = group->add_subcommand("update", "change a group's delivery order");
  add_order(update);
  update->callback([=] {
    *action = [=]() -> absl::Status {
      auto g = client::AdminClient(*opts).UpdateGroup(ToGroup(*args));
      if (!g.ok()) return g.status();
      PrintGroup("updated ", *g);
      return absl::OkStatus();
    };
  });
  CLI::App* describe = group->add_subcommand("describe", "show a group's configuration");
  describe->add_option("name,--name", args->name, "group name")->required()->check(group_name);
  describe->callback([=] {
    *action = [=]() -> absl::Status {
      auto g = client::AdminClient(*opts).DescribeGroup(args->name);
      if (!g.ok()) return g.status();
      PrintGroup("", *g);
      return absl::OkStatus();
    };
  });
}

}  // namespace tokimq::cli
