#include "disk_watermark.h"

#include <algorithm>

#include "common/logging.h"
#include "fmt/format.h"

namespace tokimq::broker {
namespace {
// Free bytes a refresh must find to leave kFull (besides the watermark).
constexpr uint64_t kLeaveFullBytes = 4u << 20;
}  // namespace

const char* DiskStateName(DiskState s) {
  switch (s) {
    case DiskState::kOk:
      return "ok";
    case DiskState::kAboveWatermark:
      return "above_watermark";
    case DiskState::kFull:
      return "full";
  }
  return "?";
}

DiskWatermark::DiskWatermark(FileSystem* fs, Clock* clock, DiskWatermarkOptions options,
                             std::function<int64_t()> appended_bytes)
    : fs_(fs),
      clock_(clock),
      opt_(std::move(options)),
      appended_bytes_(std::move(appended_bytes)) {}

uint64_t DiskWatermark::ThresholdFor(uint64_t total) const {
  uint64_t t = opt_.min_free_bytes;
  if (opt_.max_used_ratio >= 0 && opt_.max_used_ratio < 1 && total > 0) {
    // total - used limit (not total * (1 - ratio): 1 - 0.9 is a hair below 0.1).
    const auto used_limit = static_cast<uint64_t>(static_cast<double>(total) * opt_.max_used_ratio);
    t = std::max(t, total - std::min(total, used_limit));
  }
  return t;
}

void DiskWatermark::SetState(DiskState s) {
  const auto old = static_cast<DiskState>(state_.exchange(static_cast<int>(s)));
  if (old == s) return;
  const uint64_t free = free_bytes_.load(std::memory_order_relaxed);
  const uint64_t total = total_bytes_.load(std::memory_order_relaxed);
  switch (s) {
    case DiskState::kAboveWatermark:
      TOKIMQ_LOG_WARN(
          "disk usage above watermark on {}: {} bytes free of {} (producers refused below {} "
          "free); producer sends are refused, the broker's own writes go on",
          opt_.path, free, total, ThresholdFor(total));
      break;
    case DiskState::kFull:
      TOKIMQ_LOG_WARN(
          "disk holding {} ran out of space ({} bytes free at the last check); "
          "producer sends are refused until space is freed",
          opt_.path, free);
      break;
    case DiskState::kOk:
      TOKIMQ_LOG_INFO(
          "disk usage on {} below watermark again: {} bytes free of {}; producer "
          "sends admitted",
          opt_.path, free, total);
      break;
  }
}

void DiskWatermark::RefreshLocked() {
  refreshed_ms_.store(clock_->NowMs(), std::memory_order_relaxed);
  refresh_now_.store(false, std::memory_order_relaxed);
  const int64_t appended = Appended();
  absl::StatusOr<FileSystem::Space> space = fs_->DiskSpace(opt_.path);
  if (!space.ok()) {
    // Keep the last figures; the next interval tries again.
    TOKIMQ_LOG_WARN("disk watermark: statvfs {}: {}", opt_.path, space.status().ToString());
    return;
  }
  appended_at_refresh_.store(appended, std::memory_order_relaxed);
  total_bytes_.store(space->total_bytes, std::memory_order_relaxed);
  free_bytes_.store(space->free_bytes, std::memory_order_release);
  const uint64_t threshold = ThresholdFor(space->total_bytes);
  const bool was_full =
      state_.load(std::memory_order_relaxed) == static_cast<int>(DiskState::kFull);
  if (space->free_bytes == 0 ||
      (was_full && space->free_bytes < std::max(threshold, kLeaveFullBytes))) {
    // Hysteresis: leaving "full" takes a few MiB, so a disk with a few pages free does not
    // flip between full and ok (and log) once per write.
    SetState(DiskState::kFull);
  } else if (space->free_bytes < threshold) {
    SetState(DiskState::kAboveWatermark);
  } else {
    SetState(DiskState::kOk);
  }
}

void DiskWatermark::Refresh() {
  std::lock_guard<std::mutex> l(refresh_mu_);
  RefreshLocked();
}

uint64_t DiskWatermark::FreeEstimate(bool force) {
  const int64_t now = clock_->NowMs();
  const bool due =
      force || refresh_now_.load(std::memory_order_relaxed) ||
      now - refreshed_ms_.load(std::memory_order_relaxed) >= opt_.refresh_interval_ms ||
      Appended() - appended_at_refresh_.load(std::memory_order_relaxed) >=
          static_cast<int64_t>(opt_.refresh_bytes);
  if (due) {
    // One caller refreshes; the others go on with the cached figures meanwhile.
    std::unique_lock<std::mutex> l(refresh_mu_, std::try_to_lock);
    if (l.owns_lock()) RefreshLocked();
  }
  const int64_t grown = std::max<int64_t>(
      0, Appended() - appended_at_refresh_.load(std::memory_order_relaxed));
  const uint64_t free = free_bytes_.load(std::memory_order_acquire);
  return free > static_cast<uint64_t>(grown) ? free - static_cast<uint64_t>(grown) : 0;
}

absl::Status DiskWatermark::AdmitOwnWrite(uint64_t bytes) {
  const uint64_t need = kOwnWriteFloorBytes + bytes;
  uint64_t free = FreeEstimate(false);
  if (free < need) free = FreeEstimate(true);  // the estimate only grows stale downwards
  if (free < need) {
    return absl::ResourceExhaustedError(fmt::format(
        "no room for group state: {} bytes free on {}, the broker keeps {} for its metadata "
        "store; retry after space is freed",
        free, opt_.path, kOwnWriteFloorBytes));
  }
  own_bytes_.fetch_add(static_cast<int64_t>(2 * bytes), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status DiskWatermark::AdmitProducer(uint64_t bytes) {
  const uint64_t free = FreeEstimate(false);
  const uint64_t total = total_bytes_.load(std::memory_order_relaxed);
  const uint64_t threshold = ThresholdFor(total);
  const auto state = static_cast<DiskState>(state_.load(std::memory_order_acquire));
  const bool refuse =
      state == DiskState::kFull || (threshold > 0 && (free < bytes || free - bytes < threshold));
  if (!refuse) {
    if (state == DiskState::kAboveWatermark) SetState(DiskState::kOk);
    return absl::OkStatus();
  }
  sends_refused_.fetch_add(1, std::memory_order_relaxed);
  if (state == DiskState::kFull) {
    return absl::ResourceExhaustedError(fmt::format(
        "disk full: a write on {} ran out of space ({} bytes free at the last check); producer "
        "sends are refused until space is freed",
        opt_.path, free));
  }
  if (state == DiskState::kOk) SetState(DiskState::kAboveWatermark);
  const double used_pct =
      total > 0 ? 100.0 * static_cast<double>(total - std::min(total, free)) / total : 0.0;
  return absl::ResourceExhaustedError(fmt::format(
      "disk usage above watermark: {} bytes free on {} ({:.1f}% of {} bytes used); producer "
      "sends are refused below {} bytes free (disk_min_free / disk_max_used_ratio) and "
      "admitted again once space is freed",
      free, opt_.path, used_pct, total, threshold));
}

void DiskWatermark::NoteNoSpace() {
  no_space_errors_.fetch_add(1, std::memory_order_relaxed);
  SetState(DiskState::kFull);
}

DiskWatermark::Snapshot DiskWatermark::snapshot() const {
  Snapshot s;
  s.free_bytes = free_bytes_.load(std::memory_order_acquire);
  s.total_bytes = total_bytes_.load(std::memory_order_relaxed);
  s.threshold_bytes = ThresholdFor(s.total_bytes);
  s.state = static_cast<DiskState>(state_.load(std::memory_order_acquire));
  s.sends_refused = sends_refused_.load(std::memory_order_relaxed);
  s.no_space_errors = no_space_errors_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace tokimq::broker
