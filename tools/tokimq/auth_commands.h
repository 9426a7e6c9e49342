// The `tokimq user ...` and `tokimq acl ...` subcommands (docs/security.md) and the global
// credential options. Each command prints one line per item and returns OK or the error.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "client/connection.h"

namespace CLI {
class App;
}

namespace tokimq::cli {

// Adds --access-key / --secret-key (env TOKIMQ_ACCESS_KEY / TOKIMQ_SECRET_KEY), --tls and
// --tls-ca to `app`,
// filling opts, and the `user` and `acl` subcommands, which set *action when chosen.
void AddAuthCommands(CLI::App* app, client::ClientOptions* opts,
                     std::function<absl::Status()>* action);

}  // namespace tokimq::cli
