// RunShell: runs a command line through /bin/sh and collects what it printed, for tests that run
// the real `tokimq` CLI, node or other tools as child processes.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tokimq::testing {

struct CommandResult {
  int exit_code = -1;  // the exit status; -1 when killed by a signal or not started
  std::string out;     // all of stdout (and stderr when the command line folds it: 2>&1)
};

// Runs `command_line` with popen (so it may hold redirections such as `</dev/null 2>&1`) and
// waits for it to exit. Blocks the calling thread; no timeout (the commands run are bounded
// by their own request timeouts).
inline CommandResult RunShell(const std::string& command_line) {
  CommandResult r;
  FILE* p = ::popen(command_line.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tokimq::testing
