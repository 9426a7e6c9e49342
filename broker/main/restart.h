// The restart of a deposed leader (docs/replication.md "Deposed leaders"): tokimq-broker
// re-executes itself as a follower once its Broker asked for it (BrokerOptions::on_restart)
// and closed. Used by broker/main/main.cc only.
#pragma once

#include <string>
#include <vector>

namespace tokimq::broker {

// The command line of the restart: the original one (argv[0..argc)) without --port, --deposed
// and, when `leader` is known, --replicate-from / --rejoin-from (both "--opt value" and
// "--opt=value"), plus --deposed, --port `port` (the port the broker listened on: a --port 0
// broker keeps its address) and the leader: --replicate-from in static mode (it follows it),
// --rejoin-from in cluster mode (only the rejoin check at start uses it; the election names
// the leader to follow).
std::vector<std::string> RestartArgs(int argc, char** argv, bool cluster, int port,
                                     const std::string& leader);

// Replaces this process by /proc/self/exe with `args` (same pid); returns only on failure
// (errno set). Every descriptor but stdin, stdout and stderr is marked close-on-exec first.
void ReExec(const std::vector<std::string>& args);

}  // namespace tokimq::broker
