#include "replication/ack_tracker.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tokimq::replication {

void AckTracker::WhenReplicated(PhysicalOffset end, int64_t timeout_ms, Done done) {
  absl::Status answer;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (failed_.ok() && end > acked_) {
      waits_.emplace(end, Wait{clock_->NowMs() + timeout_ms, std::move(done)});
      return;
    }
    answer = failed_;
  }
  std::move(done)(answer);
}

void AckTracker::OnFollowerAck(PhysicalOffset offset) {
  std::vector<Done> ready;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (offset <= acked_) return;
    acked_ = offset;
    auto last = waits_.upper_bound(offset);
    for (auto it = waits_.begin(); it != last; ++it) ready.push_back(std::move(it->second.done));
    waits_.erase(waits_.begin(), last);
  }
  for (auto& d : ready) std::move(d)(absl::OkStatus());
}

void AckTracker::Fail(absl::Status error) {
  std::vector<Done> failed;
  {
    std::lock_guard<std::mutex> l(mu_);
    failed_ = error;
    for (auto& [end, w] : waits_) failed.push_back(std::move(w.done));
    waits_.clear();
  }
  for (auto& d : failed) std::move(d)(error);
}

void AckTracker::Reset(PhysicalOffset acked) {
  std::lock_guard<std::mutex> l(mu_);
  failed_ = absl::OkStatus();
  acked_ = acked;
}

int AckTracker::ExpireWaits() {
  std::vector<std::pair<PhysicalOffset, Done>> expired;
  {
    std::lock_guard<std::mutex> l(mu_);
    const int64_t now = clock_->NowMs();
    for (auto it = waits_.begin(); it != waits_.end();) {
      if (it->second.deadline_ms <= now) {
        expired.emplace_back(it->first, std::move(it->second.done));
        it = waits_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [end, d] : expired) {
    std::move(d)(absl::UnavailableError(absl::StrCat(
        "no follower acknowledged offset ", end.value(), " in time (replication = sync)")));
  }
  return static_cast<int>(expired.size());
}

PhysicalOffset AckTracker::acked_offset() const {
  std::lock_guard<std::mutex> l(mu_);
  return acked_;
}

size_t AckTracker::pending() const {
  std::lock_guard<std::mutex> l(mu_);
  return waits_.size();
}

}  // namespace tokimq::replication
