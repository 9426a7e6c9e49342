#include "checkpoint_sync.h"

#include "absl/container/flat_hash_set.h"
#include "common/logging.h"
#include "common/status.h"

namespace tokimq {

absl::StatusOr<std::unique_ptr<CheckpointSync>> CheckpointSync::Open(FileSystem* fs,
                                                                     const std::string& queue_root,
                                                                     size_t syncfs_above) {
  std::unique_ptr<FileSystemSyncer> syncer;
  absl::StatusOr<std::unique_ptr<FileSystemSyncer>> opened = fs->OpenSyncer(queue_root);
  if (opened.ok()) {
    syncer = std::move(*opened);
  } else if (!absl::IsUnimplemented(opened.status())) {
    return opened.status();
  }
  return std::unique_ptr<CheckpointSync>(new CheckpointSync(std::move(syncer), syncfs_above));
}

absl::Status CheckpointSync::SyncEach(const Taken& taken) {
  absl::flat_hash_set<std::string> synced_dirs;  // a topic directory once, not per queue
  for (const auto& [cq, dirty] : taken) TOKIMQ_RETURN_IF_ERROR(cq->SyncDirty(dirty, &synced_dirs));
  return absl::OkStatus();
}

void CheckpointSync::ReturnAll(const Taken& taken) {
  for (const auto& [cq, dirty] : taken) cq->ReturnDirty(dirty);
}

absl::Status CheckpointSync::Sync(const std::vector<std::shared_ptr<ConsumeQueue>>& queues) {
  Taken taken;
  size_t items = 0;
  for (const auto& cq : queues) {
    absl::StatusOr<ConsumeQueue::Dirty> d = cq->TakeDirty();
    if (!d.ok()) {
      ReturnAll(taken);
      return d.status();
    }
    if (d->empty()) continue;
    items += d->items();
    taken.emplace_back(cq, std::move(*d));
  }
  if (taken.empty()) return absl::OkStatus();
  absl::Status s;
  if (syncer_ != nullptr && items > syncfs_above_) {
    s = syncer_->SyncAll();
    if (s.ok()) {
      ++stats_.syncfs;
      if (syncfs_failing_) TOKIMQ_LOG_INFO("checkpoint: syncfs succeeds again");
      syncfs_failing_ = false;
      return absl::OkStatus();
    }
    // Possibly another file's writeback error: let each queue file report its own.
    ++stats_.syncfs_fallbacks;
    if (!syncfs_failing_) {
      TOKIMQ_LOG_WARN(
          "checkpoint: syncfs failed ({}); fsyncing {} files and directories one by "
          "one instead",
          s.ToString(), items);
    }
    syncfs_failing_ = true;
  }
  s = SyncEach(taken);
  if (!s.ok()) {
    ReturnAll(taken);
    return s;
  }
  ++stats_.item_syncs;
  return absl::OkStatus();
}

}  // namespace tokimq
