#include "restart.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace tokimq::broker {

std::vector<std::string> RestartArgs(int argc, char** argv, bool cluster, int port,
                                     const std::string& leader) {
  std::vector<std::string> drop = {"--port", "--deposed"};
  if (!leader.empty()) drop.insert(drop.end(), {"--replicate-from", "--rejoin-from"});
  std::vector<std::string> out = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool dropped = false;
    for (const std::string& d : drop) {
      if (a == d) {
        if (d != "--deposed") ++i;  // its value
        dropped = true;
      } else if (a.rfind(d + "=", 0) == 0) {
        dropped = true;
      }
    }
    if (!dropped) out.push_back(a);
  }
  out.insert(out.end(), {"--deposed", "--port", std::to_string(port)});
  if (!leader.empty()) {
    out.insert(out.end(), {cluster ? "--rejoin-from" : "--replicate-from", leader});
  }
  return out;
}

void ReExec(const std::vector<std::string>& args) {
  if (DIR* d = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(d);
    while (dirent* e = ::readdir(d)) {
      const int fd = std::atoi(e->d_name);
      if (fd > 2 && fd != own) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    ::closedir(d);
  }
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
}

}  // namespace tokimq::broker
