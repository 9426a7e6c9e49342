#include "recall_forwarder.h"

#include "client/connection.h"
#include "fmt/format.h"
#include "proto/status.h"

namespace tokimq::rocketmq {

RecallForwarder::RecallForwarder() = default;
RecallForwarder::~RecallForwarder() = default;

std::shared_ptr<RecallForwarder::Slot> RecallForwarder::SlotFor(const std::string& address,
                                                                const std::string& access_key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(address, access_key);
  auto it = slots_.find(key);
  if (it == slots_.end()) {
    if (slots_.size() >= kMaxConnections) {
      auto oldest = slots_.begin();
      for (auto s = slots_.begin(); s != slots_.end(); ++s) {
        if (s->second->last_used < oldest->second->last_used) oldest = s;
      }
      slots_.erase(oldest);  // a call still using it keeps its shared_ptr
    }
    it = slots_.emplace(key, std::make_shared<Slot>()).first;
  }
  it->second->last_used = ++uses_;
  return it->second;
}

proto::Response RecallForwarder::Forward(const std::string& owner, const std::string& address,
                                         const std::string& access_key,
                                         const std::string& secret_key,
                                         const proto::Request& req) {
  std::shared_ptr<Slot> slot = SlotFor(address, access_key);
  std::lock_guard<std::mutex> lock(slot->mu);
  absl::Status failed;
  if (slot->conn == nullptr || slot->conn->broken()) {
    client::ClientOptions o;
    o.broker = address;
    o.connect_timeout_ms = kTimeoutMs;
    o.request_timeout_ms = kTimeoutMs;
    o.client_id = "tokimq-recall-forward";
    o.access_key = access_key;
    o.secret_key = secret_key;
    absl::StatusOr<std::unique_ptr<client::Connection>> conn = client::Connection::Open(o);
    if (conn.ok()) {
      slot->conn = std::move(*conn);
    } else {
      slot->conn.reset();
      failed = conn.status();
    }
  }
  proto::Response resp;
  if (failed.ok()) {
    absl::StatusOr<proto::Response> r = slot->conn->Call(req, kTimeoutMs);
    if (r.ok()) return *std::move(r);
    failed = r.status();
  }
  // Connection::Call folds the owner's own error status into its result: keep its code and
  // text, naming the owner for transport failures.
  if (absl::IsUnavailable(failed) || absl::IsDeadlineExceeded(failed)) {
    failed = absl::Status(failed.code(),
                          fmt::format("recall forwarded to broker '{}' at {}: {}", owner, address,
                                      std::string(failed.message())));
  }
  wire::ToProto(failed, resp.mutable_status());
  return resp;
}

}  // namespace tokimq::rocketmq
