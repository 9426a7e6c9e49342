#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <shared_mutex>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/status.h"

namespace tokimq {
namespace {

absl::Status ErrnoStatus(std::string_view op, const std::string& path, int err) {
  std::string msg = absl::StrCat(std::string(op), " ", path, ": ", std::strerror(err));
  // Out of space, descriptors (per process or system wide) or memory: all transient, all
  // kResourceExhausted, so callers answer RESOURCE_EXHAUSTED and retry later (issue 25).
  if (err == ENOSPC || err == EDQUOT || err == EMFILE || err == ENFILE || err == ENOMEM) {
    return absl::ResourceExhaustedError(msg);
  }
  if (err == ENOENT) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

// The descriptor is guarded by fd_mu_ (shared for I/O, exclusive to release it), so a
// ReleaseDescriptor never closes it under a running pread/pwrite/fdatasync.
class PosixFile final : public File {
 public:
  PosixFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixFile() override {
    if (const char* m = map_.load(std::memory_order_acquire)) {
      ::munmap(const_cast<char*>(m), map_len_);
    }
    if (fd_ >= 0) ::close(fd_);
  }

  const char* MapForRead(uint64_t len) const override {
    const char* m = map_.load(std::memory_order_acquire);
    if (m == nullptr) {
      std::lock_guard<std::mutex> l(map_mu_);
      m = map_.load(std::memory_order_relaxed);
      if (m == nullptr && !map_failed_ && len > 0) {
        std::shared_lock<std::shared_mutex> fl(fd_mu_);
        if (fd_ < 0) return nullptr;
        void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd_, 0);
        if (p == MAP_FAILED) {
          // e.g. a write-only descriptor: PRead it is, for good. Out of memory or map count
          // (ENOMEM) is transient: PRead this time, map again on a later call.
          if (errno != ENOMEM) map_failed_ = true;
          return nullptr;
        }
        map_len_ = len;
        m = static_cast<const char*>(p);
        map_.store(m, std::memory_order_release);
      }
    }
    return m != nullptr && len <= map_len_ ? m : nullptr;
  }

  bool ReleaseDescriptor(uint64_t len) override {
    if (released_.load(std::memory_order_acquire)) return true;
    if (MapForRead(len) == nullptr) return false;
    std::unique_lock<std::shared_mutex> l(fd_mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    released_.store(true, std::memory_order_release);
    return true;
  }

  absl::Status Append(std::string_view data) override {
    return PWrite(size_.load(std::memory_order_relaxed), data);
  }

  absl::Status PWrite(uint64_t offset, std::string_view data) override {
    std::shared_lock<std::shared_mutex> l(fd_mu_);
    if (fd_ < 0) return ReleasedError("pwrite");
    const char* p = data.data();
    size_t left = data.size();
    uint64_t off = offset;
    while (left > 0) {
      ssize_t n = ::pwrite(fd_, p, left, static_cast<off_t>(off));
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        Grow(off);
        return ErrnoStatus("pwrite", path_, err);
      }
      p += n;
      left -= static_cast<size_t>(n);
      off += static_cast<uint64_t>(n);
    }
    Grow(off);
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> PRead(uint64_t offset, size_t n, char* scratch) const override {
    if (released_.load(std::memory_order_acquire)) {
      const uint64_t end = std::min<uint64_t>(size_.load(std::memory_order_relaxed), map_len_);
      if (offset >= end) return size_t{0};
      const size_t got = static_cast<size_t>(std::min<uint64_t>(n, end - offset));
      std::memcpy(scratch, map_.load(std::memory_order_acquire) + offset, got);
      return got;
    }
    std::shared_lock<std::shared_mutex> l(fd_mu_);
    if (fd_ < 0) {
      l.unlock();
      return PRead(offset, n, scratch);  // released meanwhile: from the mapping
    }
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("pread", path_, errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

  absl::Status Sync() override {
    std::shared_lock<std::shared_mutex> l(fd_mu_);
    if (fd_ < 0) return absl::OkStatus();  // released only once fully synced
    if (::fdatasync(fd_) != 0) return ErrnoStatus("fdatasync", path_, errno);
    return absl::OkStatus();
  }

  absl::Status Truncate(uint64_t size) override {
    std::shared_lock<std::shared_mutex> l(fd_mu_);
    if (fd_ < 0) return ReleasedError("ftruncate");
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return ErrnoStatus("ftruncate", path_, errno);
    size_.store(size, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  uint64_t Size() const override { return size_.load(std::memory_order_relaxed); }
  const std::string& path() const override { return path_; }

 private:
  absl::Status ReleasedError(std::string_view op) const {
    return absl::FailedPreconditionError(
        absl::StrCat(std::string(op), " ", path_, ": file is sealed (descriptor released)"));
  }
  void Grow(uint64_t end) {
    uint64_t cur = size_.load(std::memory_order_relaxed);
    while (end > cur && !size_.compare_exchange_weak(cur, end)) {
    }
  }
  std::string path_;
  mutable std::shared_mutex fd_mu_;
  int fd_;  // -1 once released; guarded by fd_mu_
  std::atomic<bool> released_{false};
  std::atomic<uint64_t> size_;
  // MapForRead: set once under map_mu_, then read without it.
  mutable std::mutex map_mu_;
  mutable std::atomic<const char*> map_{nullptr};
  mutable uint64_t map_len_ = 0;
  mutable bool map_failed_ = false;
};

// syncfs(2) reports writeback errors since Linux 5.8 (commit 735e4ae5ba28, "vfs: track per-sb
// writeback errors and report them to syncfs"); before that it returned 0 whatever happened.
bool SyncfsReportsErrors() {
#ifdef __linux__
  static const bool ok = [] {
    struct utsname u;
    if (::uname(&u) != 0) return false;
    int major = 0, minor = 0;
    if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
    return major > 5 || (major == 5 && minor >= 8);
  }();
  return ok;
#else
  return false;
#endif
}

#ifdef __linux__
class PosixSyncer final : public FileSystemSyncer {
 public:
  PosixSyncer(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
  ~PosixSyncer() override { ::close(fd_); }
  absl::Status SyncAll() override {
    if (::syncfs(fd_) != 0) return ErrnoStatus("syncfs", dir_, errno);
    return absl::OkStatus();
  }

 private:
  const std::string dir_;
  const int fd_;
};
#endif

class PosixFileSystem final : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    int flags = O_CLOEXEC;
    switch (mode) {
      case OpenMode::kReadOnly: flags |= O_RDONLY; break;
      case OpenMode::kReadWrite: flags |= O_RDWR | O_CREAT; break;
      case OpenMode::kTruncate: flags |= O_RDWR | O_CREAT | O_TRUNC; break;
    }
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus("fstat", path, err);
    }
    return std::unique_ptr<File>(new PosixFile(path, fd, static_cast<uint64_t>(st.st_size)));
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename", from, errno);
    return absl::OkStatus();
  }
  absl::Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("unlink", path, errno);
    return absl::OkStatus();
  }
  absl::Status CreateDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return absl::InternalError(absl::StrCat("mkdir ", path, ": ", ec.message()));
    return absl::OkStatus();
  }
  absl::Status SyncDir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open dir", path, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus("fsync dir", path, err);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<FileSystemSyncer>> OpenSyncer(const std::string& dir) override {
#ifdef __linux__
    if (SyncfsReportsErrors()) {
      int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return ErrnoStatus("open dir", dir, errno);
      return std::unique_ptr<FileSystemSyncer>(new PosixSyncer(dir, fd));
    }
#endif
    return FileSystem::OpenSyncer(dir);
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return ErrnoStatus("opendir", path, errno);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }
  bool Exists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  absl::StatusOr<uint64_t> FreeSpace(const std::string& path) override {
    struct statvfs s;
    if (::statvfs(path.c_str(), &s) != 0) return ErrnoStatus("statvfs", path, errno);
    return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  }
  absl::StatusOr<Space> DiskSpace(const std::string& path) override {
    struct statvfs s;
    if (::statvfs(path.c_str(), &s) != 0) return ErrnoStatus("statvfs", path, errno);
    // df's Use% denominator: used (blocks - free) + available. Blocks reserved for root
    // (ext4's reserved percentage, or a host's larger reservation) are neither used nor
    // available to the broker; counting them as used put a disk df shows 70 % used at 90 %.
    const uint64_t used = static_cast<uint64_t>(s.f_blocks - s.f_bfree) * s.f_frsize;
    const uint64_t avail = static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
    return Space{avail, used + avail};
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static PosixFileSystem fs;
  return &fs;
}

std::string DirName(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

absl::Status WriteFileAtomic(FileSystem* fs, const std::string& path, std::string_view data) {
  std::string tmp = path + ".tmp";
  {
    TOKIMQ_ASSIGN_OR_RETURN(auto f, fs->Open(tmp, OpenMode::kTruncate));
    TOKIMQ_RETURN_IF_ERROR(f->Append(data));
    TOKIMQ_RETURN_IF_ERROR(f->Sync());
  }
  TOKIMQ_RETURN_IF_ERROR(fs->Rename(tmp, path));
  return fs->SyncDir(DirName(path));
}

absl::StatusOr<std::string> ReadWholeFile(FileSystem* fs, const std::string& path) {
  TOKIMQ_ASSIGN_OR_RETURN(auto f, fs->Open(path, OpenMode::kReadOnly));
  std::string out(f->Size(), '\0');
  TOKIMQ_ASSIGN_OR_RETURN(size_t n, f->PRead(0, out.size(), out.data()));
  out.resize(n);
  return out;
}

}  // namespace tokimq
