// Server-side lease renewal of MessagingServiceImpl (ReceiveMessageRequest.auto_renew;
// lease_renewer.h): the renewal thread and the acks through the renewer.
#include <chrono>

#include "broker/broker.h"
#include "common/logging.h"
#include "messaging_service.h"

namespace tokimq::rocketmq {

void MessagingServiceImpl::StartRenewal() {
  if (options_.auto_renew_max_ms <= 0) return;
  renew_thread_ = std::thread([this] {
    const auto period = std::chrono::milliseconds(renewer_.options().period_ms);
    std::unique_lock<std::mutex> lock(renew_mu_);
    while (!renew_cv_.wait_for(lock, period, [this] { return renew_stop_; })) {
      lock.unlock();
      renewer_.RunOnce([this](const std::string& group, const std::string& handle,
                              int64_t invisible_ms) {
        return RenewNative(group, handle, invisible_ms);
      });
      lock.lock();
    }
  });
}

void MessagingServiceImpl::StopRenewal() {
  {
    std::lock_guard<std::mutex> lock(renew_mu_);
    renew_stop_ = true;
  }
  renew_cv_.notify_all();
  if (renew_thread_.joinable()) renew_thread_.join();
}

absl::StatusOr<std::string> MessagingServiceImpl::RenewNative(const std::string& group,
                                                               const std::string& handle,
                                                               int64_t invisible_ms) {
  proto::Request req;
  proto::ChangeInvisibleDurationRequest* c = req.mutable_change_invisible_duration();
  c->set_group(group);
  c->set_receipt_handle(handle);
  c->set_invisible_ms(invisible_ms);
  proto::Response r = Call(req);  // the broker's own act for the client that received it
  if (r.has_status() && r.status().code() != 0) {
    TOKIMQ_LOG_DEBUG("rocketmq: auto-renew in group {} stopped: {}", group, r.status().message());
    return absl::FailedPreconditionError(r.status().message());
  }
  const std::string& fresh = r.change_invisible_duration().receipt_handle();
  return fresh;
}

proto::Response MessagingServiceImpl::AckResolved(const std::string& who, const std::string& group,
                                                  const std::vector<std::string>& client_handles) {
  proto::Request native;
  proto::AckRequest* ack = native.mutable_ack();
  ack->set_group(group);
  std::vector<std::string> sent;
  sent.reserve(client_handles.size());
  for (const std::string& h : client_handles) {
    sent.push_back(renewer_.Resolve(h));
    ack->add_receipt_handles(sent.back());
  }
  proto::Response r = CallAs(who, native);
  if ((r.has_status() && r.status().code() != 0) ||
      r.ack().results_size() != static_cast<int>(client_handles.size())) {
    return r;
  }
  for (size_t i = 0; i < client_handles.size(); ++i) {
    proto::Status* result = r.mutable_ack()->mutable_results(static_cast<int>(i));
    if (result->code() != 0) {
      // Renewed between Resolve and the ack: ack the lease the renewal made.
      const std::string now = renewer_.Resolve(client_handles[i]);
      if (now == sent[i]) continue;
      proto::Request again;
      again.mutable_ack()->set_group(group);
      again.mutable_ack()->add_receipt_handles(now);
      proto::Response r2 = CallAs(who, again);
      if ((!r2.has_status() || r2.status().code() == 0) && r2.ack().results_size() == 1) {
        *result = r2.ack().results(0);
      }
    }
    if (result->code() == 0) renewer_.Forget(client_handles[i]);
  }
  return r;
}

}  // namespace tokimq::rocketmq
