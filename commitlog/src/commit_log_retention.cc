// CommitLog retention: which segments are older than the retention age, and their deletion.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "commit_log_impl.h"
#include "commitlog/record.h"
#include "common/status.h"

namespace tokimq {

absl::StatusOr<int64_t> CommitLogImpl::FirstStoreMs(const Segment& seg) const {
  TOKIMQ_ASSIGN_OR_RETURN(Message m, Read(PhysicalOffset(seg.base)));
  return m.store_ms;
}

absl::StatusOr<int> CommitLogImpl::DeleteExpiredSegments(int64_t retention_ms,
                                                         PhysicalOffset pinned_min) {
  const int64_t pinned_min_offset = pinned_min.value();
  const int64_t cutoff = clock_->NowMs() - retention_ms;
  int deleted = 0;
  while (true) {
    std::shared_ptr<Segment> seg, next;
    {
      std::shared_lock<std::shared_mutex> l(seg_mu_);
      if (segments_.size() < 2) break;  // never the active (last) segment
      auto it = segments_.begin();
      seg = it->second;
      next = (++it)->second;
    }
    if (seg->base + segment_size() > pinned_min_offset) break;
    // Records are stored in time order, so the newest record of `seg` is no newer than the
    // first record of the segment after it.
    auto first_ms = FirstStoreMs(*next);
    if (!first_ms.ok()) {
      if (absl::IsNotFound(first_ms.status())) break;  // next segment still being written
      return first_ms.status();
    }
    if (*first_ms >= cutoff) break;
    {
      std::unique_lock<std::shared_mutex> l(seg_mu_);
      segments_.erase(seg->base);
      min_offset_.store(next->base, std::memory_order_release);
    }
    TOKIMQ_RETURN_IF_ERROR(fs_->Remove(seg->path));
    ++deleted;
  }
  if (deleted > 0) TOKIMQ_RETURN_IF_ERROR(fs_->SyncDir(opt_.dir));
  return deleted;
}

absl::StatusOr<PhysicalOffset> CommitLogImpl::ExpiredEnd(int64_t retention_ms) const {
  const int64_t cutoff = clock_->NowMs() - retention_ms;
  std::vector<std::shared_ptr<Segment>> segs;
  {
    std::shared_lock<std::shared_mutex> l(seg_mu_);
    for (const auto& [base, seg] : segments_) segs.push_back(seg);
  }
  int64_t end = MinOffset().value();
  // As DeleteExpiredSegments: never the active (last) segment; a segment's age is the store
  // time of the next segment's first record.
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    auto first_ms = FirstStoreMs(*segs[i + 1]);
    if (!first_ms.ok()) {
      if (absl::IsNotFound(first_ms.status())) break;
      return first_ms.status();
    }
    if (*first_ms >= cutoff) break;
    end = segs[i + 1]->base;
  }
  return PhysicalOffset(end);
}

absl::StatusOr<int64_t> CommitLogImpl::SegmentStoreMs(PhysicalOffset at) const {
  const int64_t physical_offset = at.value();
  if (physical_offset < MinOffset().value() || physical_offset >= MaxOffset().value()) {
    return absl::NotFoundError(absl::StrCat("no segment holds offset ", physical_offset));
  }
  const int64_t base = physical_offset - physical_offset % segment_size();
  auto first = Read(PhysicalOffset(std::max(base, MinOffset().value())));
  if (!first.ok()) return first.status();
  return first->store_ms;
}

}  // namespace tokimq
