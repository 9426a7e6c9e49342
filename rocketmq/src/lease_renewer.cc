#include "lease_renewer.h"

#include <algorithm>
#include <vector>

#include "common/clock.h"

namespace tokimq::rocketmq {

LeaseRenewerOptions RenewerOptionsFor(int64_t lease_ms, int64_t max_ms) {
  LeaseRenewerOptions o;
  o.slice_ms = lease_ms;
  o.ahead_ms = std::min<int64_t>(10'000, lease_ms / 2);
  o.max_ms = max_ms;
  o.period_ms = std::clamp<int64_t>(o.ahead_ms / 4, 50, 1'000);
  return o;
}

bool LeaseRenewer::Track(const std::string& client_id, const std::string& group,
                         const std::string& handle, int64_t lease_end_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.max_ms <= 0 || entries_.size() >= options_.max_entries) return false;
  entries_[handle] = Entry{client_id, group, handle, clock_->NowMs(), lease_end_ms};
  return true;
}

std::string LeaseRenewer::Resolve(const std::string& client_handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(client_handle);
  return it == entries_.end() ? client_handle : it->second.current;
}

void LeaseRenewer::Forget(const std::string& client_handle) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(client_handle);
}

void LeaseRenewer::ForgetClient(const std::string& client_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->second.client_id == client_id ? entries_.erase(it) : std::next(it);
  }
}

size_t LeaseRenewer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

int LeaseRenewer::RunOnce(const RenewFn& renew) {
  const int64_t now = clock_->NowMs();
  struct Due {
    std::string client_handle;
    std::string group;
    std::string current;
  };
  std::vector<Due> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      const Entry& e = it->second;
      if (e.lease_end_ms - now > options_.ahead_ms) {
        ++it;
      } else if (now - e.received_ms >= options_.max_ms || e.lease_end_ms <= now) {
        // Past the maximum: let the lease run out. Already ended: nothing left to renew.
        it = entries_.erase(it);
      } else {
        due.push_back({it->first, e.group, e.current});
        ++it;
      }
    }
  }
  int renewed = 0;
  for (const Due& d : due) {
    absl::StatusOr<std::string> fresh = renew(d.group, d.current, options_.slice_ms);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(d.client_handle);
    // Settled meanwhile (Forget) or renewed by someone else: the answer no longer applies.
    if (it == entries_.end() || it->second.current != d.current) continue;
    if (!fresh.ok()) {
      entries_.erase(it);
      continue;
    }
    it->second.current = *fresh;
    it->second.lease_end_ms = now + options_.slice_ms;
    ++renewed;
  }
  return renewed;
}

}  // namespace tokimq::rocketmq
