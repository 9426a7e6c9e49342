// The broker's clock (Broker::SetUpClock, the advance_clock request): the system clock, or with
// --manual-clock a ManualClock whose time is persisted in the metadata DB, so a restart never
// moves it backwards (docs/testing.md).
#include <rocksdb/db.h>

#include <algorithm>
#include <string>

#include "broker/broker.h"
#include "common/clock.h"
#include "common/coding.h"
#include "common/logging.h"
#include "common/status.h"
#include "fmt/format.h"

namespace tokimq::broker {
namespace {

constexpr char kManualClockKey[] = "broker/manual_clock_ms";

// Stores `now_ms` as the manual clock's time (synced write: an acknowledged advance survives).
absl::Status PersistManualClock(rocksdb::DB* db, int64_t now_ms) {
  std::string v;
  PutFixed64(&v, static_cast<uint64_t>(now_ms));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = db->Put(wo, kManualClockKey, v);
  if (s.ok()) return absl::OkStatus();
  if (s.IsNoSpace()) return absl::ResourceExhaustedError("persist manual clock: " + s.ToString());
  return absl::InternalError("persist manual clock: " + s.ToString());
}

}  // namespace

absl::Status Broker::SetUpClock() {
  if (options_.manual_clock) {
    int64_t start = options_.manual_clock_start_ms;
    if (start == 0) start = SystemClock::Default()->NowMs();
    std::string saved;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), kManualClockKey, &saved);
    if (s.ok() && saved.size() == 8) {
      start = std::max(start, static_cast<int64_t>(DecodeFixed64(saved.data())));
    }
    manual_clock_ = std::make_unique<ManualClock>(start);
    clock_ = manual_clock_.get();
    // Persisted at once, not only on advance: otherwise a broker started at a given time and
    // restarted before any advance would go back to the system time.
    TOKIMQ_RETURN_IF_ERROR(PersistManualClock(db_.get(), start));
    TOKIMQ_LOG_INFO("manual clock at {} ms", start);
  } else {
    clock_ = options_.clock != nullptr ? options_.clock : SystemClock::Default();
  }
  return absl::OkStatus();
}

absl::Status Broker::HandleAdvanceClock(const proto::AdvanceClockRequest& req,
                                        proto::Response* resp) {
  if (!manual_clock_) {
    return absl::FailedPreconditionError(
        "advance-clock refused: the broker was not started with --manual-clock");
  }
  if (req.advance_ms() < 0) return absl::InvalidArgumentError("advance must be >= 0 ms");
  // The clock counts microseconds in an int64: an advance of more than ~292,000 years would
  // overflow (ms * 1000, then the sum) and could move the clock backwards. Nothing needs a
  // time past the year 9999 (the last RFC 3339 one).
  const int64_t now_ms = manual_clock_->NowMs();
  if (req.advance_ms() > kMaxManualClockMs - now_ms) {
    return absl::InvalidArgumentError(fmt::format(
        "advance of {} ms would move the clock past 9999-12-31T23:59:59.999Z (now {} ms)",
        req.advance_ms(), now_ms));
  }
  manual_clock_->AdvanceMs(req.advance_ms());
  int64_t now = manual_clock_->NowMs();
  TOKIMQ_RETURN_IF_ERROR(PersistManualClock(db_.get(), now));
  resp->mutable_advance_clock()->set_now_ms(now);
  return absl::OkStatus();
}

}  // namespace tokimq::broker
