// CheckpointSync: makes every ConsumeQueue change that a MessageStore checkpoint is about to
// claim durable, with O(1) system calls when there are many (issue 25: the first checkpoint of
// a broker with 10,000 new topics made ~170,000 fsyncs, one per new queue file, one per queue
// directory and one per topic directory, and took 355 s).
//
// How. The checkpoint takes the Dirty marks of every queue (ConsumeQueue::TakeDirty, which
// first writes the buffered entries), counts the fsyncs they name, and
//   - up to `syncfs_above` of them: fsyncs each file and directory (ConsumeQueue::SyncDirty);
//   - more: calls syncfs(2) once on the file system holding consumequeue/ (FileSystemSyncer).
// If a step fails, every mark taken is returned (ConsumeQueue::ReturnDirty) and the checkpoint
// is not written, so the next one covers the same changes again.
//
// Why one syncfs is enough for the checkpoint to claim the queues (the crash-safety argument).
// A checkpoint at CommitLog offset D claims: every entry of every ConsumeQueue for records
// below D is in a file whose data and directory entry (and its directory's entry in the topic
// directory, and the topic's in consumequeue/) survive a power loss. Every such entry was
// written (pwrite), and every such file and directory created, before TakeDirty returned
// (TakeDirty writes the buffered entries; D was read before it under the put lock). syncfs
// writes out all dirty data and metadata of the file system, directory entries included, and
// returns only when it is on stable storage (the same journal commit fsync of each would make).
// So after a syncfs that returns 0, everything the checkpoint claims is durable.
// A syncfs that returns 0 although a writeback failed would break this: that is why the syncer
// is used only where syncfs reports writeback errors (Linux >= 5.8) and why its descriptor is
// opened when the store opens, before any queue file is written, and held until it closes (the
// error is sampled per open descriptor, so a descriptor opened per checkpoint would miss an
// error from the background writeback that came before it). A syncfs error may come from any
// file of the file system (another process's, or a CommitLog segment); the checkpoint then
// falls back to fsyncing each file and directory of its marks, which reports a queue file's own
// writeback error (syncfs does not consume it) and fails that queue for good
// (ConsumeQueue::TakeDirty), so the checkpoint is written only if the queues themselves are
// durable. consumequeue/ and everything below it must be one file system (a mount point below
// it is not supported): syncfs covers the file system of the descriptor only.
//
// Cost: syncfs also writes out what other files of the file system have dirty (the CommitLog's
// unflushed tail under --flush async, RocksDB, other processes); below `syncfs_above` items the
// checkpoint keeps to per-file fsyncs, so a broker with a few busy queues does not pay it.
//
// Thread-safety: Sync is called by one checkpoint at a time (MessageStore's checkpoint lock).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commitlog/consume_queue.h"
#include "common/file.h"

namespace tokimq {

class CheckpointSync {
 public:
  struct Stats {
    uint64_t syncfs = 0;            // checkpoints made durable by one syncfs
    uint64_t item_syncs = 0;        // checkpoints made durable file by file
    uint64_t syncfs_fallbacks = 0;  // syncfs failed; fell back to file by file
  };

  // Opens the syncer on `queue_root` (the consumequeue/ directory; must exist). A file system
  // without one (FileSystem::OpenSyncer: kUnimplemented) syncs file by file always. Errors:
  // those of OpenSyncer (kResourceExhausted when out of descriptors).
  static absl::StatusOr<std::unique_ptr<CheckpointSync>> Open(FileSystem* fs,
                                                              const std::string& queue_root,
                                                              size_t syncfs_above);

  // Makes the changes of `queues` durable (see above). OK only if everything they had changed
  // before this call is durable. Errors: those of ConsumeQueue::TakeDirty / SyncDirty and of
  // syncfs when the fallback fails too.
  absl::Status Sync(const std::vector<std::shared_ptr<ConsumeQueue>>& queues);

  bool has_syncer() const { return syncer_ != nullptr; }
  Stats stats() const { return stats_; }

 private:
  CheckpointSync(std::unique_ptr<FileSystemSyncer> syncer, size_t syncfs_above)
      : syncer_(std::move(syncer)), syncfs_above_(syncfs_above) {}
  using Taken = std::vector<std::pair<std::shared_ptr<ConsumeQueue>, ConsumeQueue::Dirty>>;
  static absl::Status SyncEach(const Taken& taken);
  static void ReturnAll(const Taken& taken);

  std::unique_ptr<FileSystemSyncer> syncer_;  // nullptr: file by file only
  const size_t syncfs_above_;
  bool syncfs_failing_ = false;  // logged once per state change
  Stats stats_;
};

}  // namespace tokimq
