#include "cluster/membership.h"

#include "cluster/keys.h"
#include "common/logging.h"
#include "fmt/format.h"

namespace tokimq::cluster {
namespace {

bool EtcdDown(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

}  // namespace

Membership::Membership(EtcdClient* etcd, MembershipOptions options)
    : etcd_(etcd), options_(std::move(options)) {}

Membership::~Membership() { Stop(false); }

absl::Status Membership::RegisterOnce() {
  const std::string key =
      options_.key.empty() ? BrokerKey(options_.cluster, options_.self.name()) : options_.key;
  const std::string value = EncodeValue(options_.self);
  absl::StatusOr<int64_t> lease = etcd_->LeaseGrant(options_.ttl_s);
  etcd_reachable_.store(lease.ok() || !EtcdDown(lease.status()));
  if (!lease.ok()) return lease.status();
  EtcdTxn create;
  create.compares.push_back({key, EtcdTxn::Compare::Kind::kCreateRevisionEquals, 0});
  create.puts.push_back({key, value, *lease});
  create.failure_gets.push_back(key);
  absl::StatusOr<EtcdTxnResult> r = etcd_->Txn(create);
  if (!r.ok()) return r.status();  // the lease expires by itself
  if (!r->succeeded && !r->failure_kvs.empty()) {
    const KeyValue& held = r->failure_kvs[0];
    proto::BrokerRecord other;
    (void)DecodeValue(held.key, held.value, &other);
    if (other.address() != options_.self.address()) {
      (void)etcd_->LeaseRevoke(*lease);
      return absl::AlreadyExistsError(fmt::format(
          "broker name '{}'{} is already registered in cluster '{}' by the broker at {}: stop it "
          "or choose another --broker-name{}",
          options_.self.name(),
          options_.key.empty() ? "" : fmt::format(" id {}", options_.self.broker_id()),
          options_.cluster, other.address(), options_.key.empty() ? "" : " / --broker-id"));
    }
    // Our own record from before a restart: replace it (compare-and-swap) under the new lease.
    EtcdTxn replace;
    replace.compares.push_back({key, EtcdTxn::Compare::Kind::kModRevisionEquals, held.mod_revision});
    replace.puts.push_back({key, value, *lease});
    r = etcd_->Txn(replace);
    if (!r.ok()) return r.status();
    if (r->succeeded) {
      TOKIMQ_LOG_INFO("cluster {}: replaced this broker's registration from before a restart",
                      options_.cluster);
    }
  }
  if (!r->succeeded) {
    (void)etcd_->LeaseRevoke(*lease);
    return absl::AbortedError("registration raced with another change; retrying");
  }
  lease_.store(*lease);
  registered_.store(true);
  registrations_.fetch_add(1);
  TOKIMQ_LOG_INFO("cluster {}: registered broker {} at {} (lease {:x}, ttl {} s)",
                  options_.cluster, options_.self.name(), options_.self.address(), *lease,
                  options_.ttl_s);
  return absl::OkStatus();
}

void Membership::Start(std::function<void(const absl::Status&)> on_conflict) {
  thread_ = std::thread([this, f = std::move(on_conflict)]() mutable { Loop(std::move(f)); });
}

bool Membership::WaitMs(int64_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop_; });
  return !stop_;
}

void Membership::Loop(std::function<void(const absl::Status&)> on_conflict) {
  const int64_t keepalive_ms = std::max<int64_t>(options_.ttl_s * 1000 / 3, 100);
  bool warned = false;
  while (true) {
    if (registered_.load()) {
      if (!WaitMs(keepalive_ms)) return;
      absl::StatusOr<int64_t> ttl = etcd_->LeaseKeepAlive(lease_.load());
      etcd_reachable_.store(ttl.ok() || !EtcdDown(ttl.status()));
      if (ttl.ok()) {
        warned = false;
        continue;
      }
      if (absl::IsNotFound(ttl.status())) {
        registered_.store(false);
        TOKIMQ_LOG_WARN("cluster {}: lease lost ({}): registering again", options_.cluster,
                        ttl.status().ToString());
      } else if (!warned) {
        warned = true;
        TOKIMQ_LOG_WARN("cluster {}: etcd keepalive failed ({}): serving on, retrying",
                        options_.cluster, ttl.status().ToString());
      }
      continue;
    }
    absl::Status s = RegisterOnce();
    if (s.ok()) {
      warned = false;
      continue;
    }
    if (absl::IsAlreadyExists(s)) {
      TOKIMQ_LOG_ERROR("cluster {}: {}", options_.cluster, s.ToString());
      if (on_conflict) on_conflict(s);
    } else if (!warned) {
      warned = true;
      TOKIMQ_LOG_WARN("cluster {}: cannot register with etcd ({}): serving on, retrying every {} ms",
                      options_.cluster, s.ToString(), options_.retry_ms);
    }
    if (!WaitMs(options_.retry_ms)) return;
  }
}

void Membership::Stop(bool revoke) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (revoke && registered_.exchange(false)) {
    absl::Status s = etcd_->LeaseRevoke(lease_.load());
    if (!s.ok()) TOKIMQ_LOG_WARN("cluster {}: lease revoke: {}", options_.cluster, s.ToString());
  }
}

}  // namespace tokimq::cluster
