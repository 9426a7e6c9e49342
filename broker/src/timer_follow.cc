// The timer store of a replica (issue 20 item 3, docs/replication.md "The follower's timer
// store"): follower mode from open until the broker leads, then the promotion step.
#include "broker/broker.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker {

absl::Status Broker::StartTimerFollowing() {
  std::lock_guard<std::mutex> l(timer_mode_mu_);
  if (serving_started_) return absl::OkStatus();  // it leads already
  return timers_->StartFollowing();
}

absl::Status Broker::PromoteTimerStore() {
  // Real time even on the manual clock: this is what a failover waits for.
  const int64_t t0 = SystemClock::Default()->NowMicros();
  TOKIMQ_RETURN_IF_ERROR(timers_->Stop());  // the follower mode's threads (checkpoints)
  TOKIMQ_RETURN_IF_ERROR(timers_->AdoptReplicatedLog());
  TOKIMQ_LOG_INFO("timer store: follower stopped and replicated log adopted in {} us",
                  SystemClock::Default()->NowMicros() - t0);
  return absl::OkStatus();
}

}  // namespace tokimq::broker
