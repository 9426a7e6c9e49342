// The broker's file-descriptor budget (issue 25; docs/operations.md "File descriptors").
//
// A broker needs descriptors for: a fixed set (stdio, the listening sockets, epoll and eventfds
// of the I/O threads, RocksDB's metadata DB, bounded by kRocksDbMaxOpenFiles, the store
// checkpoint's syncfs descriptor), the CommitLog and TimerLog segments not yet fsynced (1-3
// each: a sealed segment is read through its mapping without a descriptor), one per client
// connection, and the ConsumeQueue files, which would
// grow with topics x queues and are therefore held in a FileCache of `max_open_files`.
// MaxOpenFilesFor gives that cache half of what is left after kReservedDescriptors, so the other
// half stays for connections and segments.
//
// Thread-safety: free functions; RaiseNoFileLimit changes a process-wide limit (call it from
// main before threads start).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tokimq::broker {

// Descriptors set aside for everything but ConsumeQueue files, connections and segments.
inline constexpr uint64_t kReservedDescriptors = 64;
// RocksDB's table cache cap for the metadata DB (its default, -1, keeps every SST open).
inline constexpr int kRocksDbMaxOpenFiles = 32;
// MaxOpenFilesFor never goes above this: past it, an idle descriptor costs more kernel memory
// than a reopen costs time.
inline constexpr size_t kMaxAutoOpenFiles = 65536;
// ... nor below this, even under a tiny limit (opens then fail and are retried).
inline constexpr size_t kMinAutoOpenFiles = 16;

struct NoFileLimit {
  uint64_t soft = 0;        // RLIMIT_NOFILE soft limit now in force
  uint64_t hard = 0;        // its hard limit (RLIM_INFINITY shown as UINT64_MAX)
  uint64_t raised_from = 0; // the soft limit before RaiseNoFileLimit raised it; 0 if unchanged
};

// The current RLIMIT_NOFILE.
NoFileLimit CurrentNoFileLimit();
// Raises the soft limit to the hard limit (at most 1,048,576) when it is lower, as RocksDB's
// and most servers' start scripts do. A failure leaves the limit as it was.
NoFileLimit RaiseNoFileLimit();
// The ConsumeQueue file cache size for a soft limit of `nofile` descriptors:
// clamp((nofile - kReservedDescriptors) / 2, kMinAutoOpenFiles, kMaxAutoOpenFiles).
size_t MaxOpenFilesFor(uint64_t nofile);
// A configured cache size the limit can hold: at most 3/4 of what the limit leaves after
// kReservedDescriptors (at least kMinAutoOpenFiles). A cache above the limit held every
// descriptor and left checkpoints, connections and segment rolls failing for good (RocksDB
// clamps its max_open_files to the limit the same way).
size_t ClampMaxOpenFiles(size_t configured, uint64_t nofile);
// One line for the start-up log: the limit, what the cache holds, what is left.
std::string DescribeBudget(const NoFileLimit& limit, size_t max_open_files);

}  // namespace tokimq::broker
