#include "replication/leadership.h"

#include "absl/strings/str_cat.h"

namespace tokimq::replication {

const char* RoleName(Role role) { return role == Role::kLeader ? "leader" : "follower"; }

Leadership::Leadership(Role role, int64_t term, std::string leader_address) {
  view_.role = role;
  view_.term = term;
  view_.leader_address = std::move(leader_address);
}

LeadershipView Leadership::Current() const {
  std::lock_guard<std::mutex> l(mu_);
  return view_;
}

bool Leadership::IsLeaderOf(int64_t term) const {
  std::lock_guard<std::mutex> l(mu_);
  return view_.role == Role::kLeader && view_.term == term;
}

bool Leadership::ObserveTerm(int64_t term) {
  LeadershipView changed;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (term < view_.term) return false;
    if (term == view_.term) return true;
    view_.term = term;
    term_only_observed_ = true;
    if (view_.role == Role::kLeader) {
      view_.role = Role::kFollower;
      view_.leader_address.clear();
    }
    changed = view_;
  }
  Notify(changed);
  return true;
}

absl::Status Leadership::Promote(int64_t term) {
  LeadershipView changed;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (term < view_.term || (term == view_.term && !term_only_observed_)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot lead term ", term, ": term ", view_.term, " was already seen"));
    }
    view_ = LeadershipView{Role::kLeader, term, ""};
    term_only_observed_ = false;
    changed = view_;
  }
  Notify(changed);
  return absl::OkStatus();
}

absl::Status Leadership::Demote(int64_t term, std::string leader_address) {
  if (leader_address.empty()) return absl::InvalidArgumentError("a follower needs a leader");
  LeadershipView changed;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (term < view_.term || (term == view_.term && view_.role == Role::kLeader)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot follow in term ", term, ": this replica has seen term ", view_.term,
          view_.role == Role::kLeader ? " and leads it" : ""));
    }
    view_ = LeadershipView{Role::kFollower, term, std::move(leader_address)};
    term_only_observed_ = false;
    changed = view_;
  }
  Notify(changed);
  return absl::OkStatus();
}

bool Leadership::StepDown(int64_t term) {
  LeadershipView changed;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (view_.role != Role::kLeader || view_.term != term) return false;
    view_.role = Role::kFollower;
    view_.leader_address.clear();
    changed = view_;
  }
  Notify(changed);
  return true;
}

void Leadership::Subscribe(Listener listener) {
  std::lock_guard<std::mutex> l(listeners_mu_);
  listeners_.push_back(std::move(listener));
}

void Leadership::Notify(const LeadershipView& view) {
  std::lock_guard<std::mutex> l(listeners_mu_);
  for (const auto& f : listeners_) f(view);
}

}  // namespace tokimq::replication
