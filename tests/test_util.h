// Test helpers shared by every test module.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace tokimq::testing {

// A fresh directory under $TMPDIR removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tokimq-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Descriptors of this process open on files under `dir` (/proc/self/fd links; 0 elsewhere).
inline int OpenDescriptorsUnder(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code lec;
    const std::string target = std::filesystem::read_symlink(e.path(), lec).string();
    if (!lec && target.compare(0, dir.size(), dir) == 0) ++n;
  }
  return n;
}

}  // namespace tokimq::testing
