// The `tokimq group ...` subcommands: create, update and describe a consumer group's
// configuration (its delivery order; docs/ordering.md "Delivery order of a consumer group").
// Each command prints one line and returns OK or the broker's error.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "client/connection.h"

namespace CLI {
class App;
}

namespace tokimq::cli {

// Adds the `group` subcommand to `app`; the chosen command sets *action.
void AddGroupCommands(CLI::App* app, client::ClientOptions* opts,
                      std::function<absl::Status()>* action);

}  // namespace tokimq::cli
