// EtcdClient over etcd's generated v3 stubs (KV, Lease, Watch).
#include "cluster/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "common/logging.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "fmt/format.h"

namespace tokimq::cluster {
namespace {

namespace pb = etcdserverpb;

gpr_timespec DeadlineAfter(int64_t ms) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& endpoint) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      fmt::format("etcd {}: {}", endpoint, s.error_message()));
}

bool TryNextEndpoint(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// The range end that selects every key starting with `prefix` (etcd's "prefix + 1").
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  for (size_t i = end.size(); i > 0; --i) {
    if (static_cast<unsigned char>(end[i - 1]) < 0xff) {
      end[i - 1] = static_cast<char>(static_cast<unsigned char>(end[i - 1]) + 1);
      end.resize(i);
      return end;
    }
  }
  return std::string(1, '\0');  // all keys
}

KeyValue FromPb(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.lease = kv.lease();
  return out;
}

}  // namespace

struct EtcdClient::Impl {
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Lease::Stub> lease;
    std::unique_ptr<pb::Watch::Stub> watch;
  };
  std::vector<Endpoint> endpoints;
  std::atomic<size_t> current{0};
  int64_t timeout_ms = 3'000;
  // One per endpoint: keeps the channel connecting (KeepConnecting).
  std::vector<std::thread> connectors;
  std::atomic<bool> stop{false};

  ~Impl() {
    stop.store(true);
    for (std::thread& t : connectors) t.join();
  }

  // Waits on `channel`'s connectivity state for as long as the client lives, asking it to
  // connect whenever it is not READY. A gRPC channel makes progress on a connection attempt
  // (the TCP connect, the HTTP/2 handshake) only while some thread polls it: a call waiting on
  // it, or gRPC's backup poller, every 5 s. While etcd is down this client's calls fail fast
  // (the channel is in TRANSIENT_FAILURE; no call waits), so after etcd came back a broker's
  // connection attempt begun during the restart advanced only at the backup poller's turns:
  // ~10 s more without etcd (a leader 11-12 s after etcd answered, EtcdOutageTest, 2026-12-02/03;
  // traced with GRPC_TRACE=subchannel: each such attempt CONNECTING for 10.0 s, and with a 5 s
  // connect timeout every attempt timed out). This thread is such a waiter: the same test now
  // has a leader 0.1-1.0 s after etcd answers.
  static void KeepConnecting(const std::shared_ptr<grpc::Channel>& channel,
                             const std::atomic<bool>* stop) {
    constexpr auto kWait = std::chrono::milliseconds(100);  // bounds the destructor's join
    while (!stop->load()) {
      const grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
      if (state == GRPC_CHANNEL_SHUTDOWN) return;  // final: waiting on it would return at once
      channel->WaitForStateChange(state, std::chrono::system_clock::now() + kWait);
    }
  }

  // Runs fn(endpoint, context) on the current endpoint, then the others while they are
  // unreachable; the first that answers becomes current.
  template <typename Fn>
  absl::Status Call(Fn fn) {
    const size_t start = current.load();
    absl::Status last = absl::UnavailableError("etcd: no endpoint");
    for (size_t i = 0; i < endpoints.size(); ++i) {
      const size_t idx = (start + i) % endpoints.size();
      grpc::ClientContext ctx;
      ctx.set_deadline(DeadlineAfter(timeout_ms));
      grpc::Status s = fn(endpoints[idx], &ctx);
      if (s.ok()) {
        current.store(idx);
        return absl::OkStatus();
      }
      last = FromGrpc(s, endpoints[idx].address);
      if (!TryNextEndpoint(s)) break;
    }
    return last;
  }
};

absl::StatusOr<std::vector<std::string>> ParseEndpoints(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  auto flush = [&]() -> absl::Status {
    if (item.empty()) return absl::OkStatus();
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      return absl::InvalidArgumentError(
          fmt::format("etcd endpoint '{}' is not host:port", item));
    }
    out.push_back(item);
    item.clear();
    return absl::OkStatus();
  };
  for (char c : list) {
    if (c == ' ') continue;
    if (c == ',') {
      if (absl::Status s = flush(); !s.ok()) return s;
      continue;
    }
    item.push_back(c);
  }
  if (absl::Status s = flush(); !s.ok()) return s;
  if (out.empty()) return absl::InvalidArgumentError("no etcd endpoint given");
  return out;
}

EtcdClient::EtcdClient(EtcdOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}
EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoint given");
  std::unique_ptr<EtcdClient> c(new EtcdClient(options));
  c->impl_->timeout_ms = options.timeout_ms;
  for (const std::string& address : options.endpoints) {
    grpc::ChannelArguments args;
    // Reconnect quickly after an etcd restart (gRPC's default backoff grows to 120 s).
    // (Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: it is also the connect timeout, and 100 ms cut
    // handshakes on a loaded machine. Its 2 s failure of 2026-12-02 — every attempt "tcp
    // handshaker shutdown" — was the unpolled handshake of Impl::KeepConnecting.)
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1'000);
    Impl::Endpoint ep;
    ep.address = address;
    ep.channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    ep.kv = pb::KV::NewStub(ep.channel);
    ep.lease = pb::Lease::NewStub(ep.channel);
    ep.watch = pb::Watch::NewStub(ep.channel);
    c->impl_->endpoints.push_back(std::move(ep));
  }
  for (const Impl::Endpoint& ep : c->impl_->endpoints) {
    c->impl_->connectors.emplace_back(&Impl::KeepConnecting, ep.channel, &c->impl_->stop);
  }
  return c;
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  pb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  pb::PutResponse resp;
  absl::Status s = impl_->Call([&](Impl::Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Put(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp.header().revision();
}

absl::StatusOr<std::optional<KeyValue>> EtcdClient::Get(const std::string& key) {
  pb::RangeRequest req;
  req.set_key(key);
  pb::RangeResponse resp;
  absl::Status s = impl_->Call([&](Impl::Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Range(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  if (resp.kvs_size() == 0) return std::optional<KeyValue>();
  return std::optional<KeyValue>(FromPb(resp.kvs(0)));
}

absl::StatusOr<RangeResult> EtcdClient::RangePrefix(const std::string& prefix) {
  pb::RangeRequest req;
  req.set_key(prefix);
  req.set_range_end(PrefixEnd(prefix));
  req.set_sort_order(pb::RangeRequest::ASCEND);
  req.set_sort_target(pb::RangeRequest::KEY);
  pb::RangeResponse resp;
  absl::Status s = impl_->Call([&](Impl::Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Range(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  RangeResult out;
  out.revision = resp.header().revision();
  for (const mvccpb::KeyValue& kv : resp.kvs()) out.kvs.push_back(FromPb(kv));
  return out;
}

absl::StatusOr<int64_t> EtcdClient::Delete(const std::string& key) {
  pb::DeleteRangeRequest req;
  req.set_key(key);
  pb::DeleteRangeResponse resp;
  absl::Status s = impl_->Call([&](Impl::Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->DeleteRange(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp.deleted();
}

absl::StatusOr<EtcdTxnResult> EtcdClient::Txn(const EtcdTxn& txn) {
  pb::TxnRequest req;
  for (const EtcdTxn::Compare& c : txn.compares) {
    pb::Compare* cmp = req.add_compare();
    cmp->set_key(c.key);
    cmp->set_result(pb::Compare::EQUAL);
    if (c.kind == EtcdTxn::Compare::Kind::kCreateRevisionEquals) {
      cmp->set_target(pb::Compare::CREATE);
      cmp->set_create_revision(c.revision);
    } else {
      cmp->set_target(pb::Compare::MOD);
      cmp->set_mod_revision(c.revision);
    }
  }
  for (const EtcdTxn::Put& p : txn.puts) {
    pb::PutRequest* put = req.add_success()->mutable_request_put();
    put->set_key(p.key);
    put->set_value(p.value);
    put->set_lease(p.lease);
  }
  for (const std::string& k : txn.deletes) {
    req.add_success()->mutable_request_delete_range()->set_key(k);
  }
  for (const std::string& prefix : txn.delete_prefixes) {
    pb::DeleteRangeRequest* del = req.add_success()->mutable_request_delete_range();
    del->set_key(prefix);
    del->set_range_end(PrefixEnd(prefix));
  }
  for (const std::string& k : txn.failure_gets) {
    req.add_failure()->mutable_request_range()->set_key(k);
  }
  pb::TxnResponse resp;
  absl::Status s = impl_->Call([&](Impl::Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Txn(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  EtcdTxnResult out;
  out.succeeded = resp.succeeded();
  out.revision = resp.header().revision();
  if (!out.succeeded) {
    for (const pb::ResponseOp& op : resp.responses()) {
      if (!op.has_response_range()) continue;
      for (const mvccpb::KeyValue& kv : op.response_range().kvs()) {
        out.failure_kvs.push_back(FromPb(kv));
      }
    }
  }
  return out;
}

absl::StatusOr<int64_t> EtcdClient::LeaseGrant(int64_t ttl_s) {
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  pb::LeaseGrantResponse resp;
  absl::Status s = impl_->Call([&](Impl::Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseGrant(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  if (!resp.error().empty()) return absl::InternalError("etcd lease grant: " + resp.error());
  return resp.id();
}

absl::StatusOr<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease) {
  pb::LeaseKeepAliveResponse resp;
  bool answered = false;
  absl::Status s = impl_->Call([&](Impl::Endpoint& ep, grpc::ClientContext* ctx) {
    auto stream = ep.lease->LeaseKeepAlive(ctx);
    pb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    if (stream->Write(req)) answered = stream->Read(&resp);
    stream->WritesDone();
    grpc::Status st = stream->Finish();
    if (answered) return grpc::Status::OK;
    return st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keepalive stream closed") : st;
  });
  if (!s.ok()) return s;
  if (resp.ttl() <= 0) {
    return absl::NotFoundError(fmt::format("etcd lease {:x} expired or revoked", lease));
  }
  return resp.ttl();
}

absl::Status EtcdClient::LeaseRevoke(int64_t lease) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse resp;
  return impl_->Call([&](Impl::Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseRevoke(ctx, req, &resp);
  });
}

std::unique_ptr<PrefixWatcher> EtcdClient::WatchPrefix(
    std::string prefix, std::function<void(const WatchBatch&)> on_batch, int64_t retry_ms) {
  std::unique_ptr<PrefixWatcher> w(
      new PrefixWatcher(this, std::move(prefix), std::move(on_batch), retry_ms));
  w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  return w;
}

PrefixWatcher::PrefixWatcher(EtcdClient* client, std::string prefix,
                             std::function<void(const WatchBatch&)> on_batch, int64_t retry_ms)
    : client_(client),
      prefix_(std::move(prefix)),
      on_batch_(std::move(on_batch)),
      retry_ms_(retry_ms) {}

PrefixWatcher::~PrefixWatcher() { Stop(); }

void PrefixWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (cancel_ != nullptr) static_cast<grpc::ClientContext*>(cancel_)->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void PrefixWatcher::Loop() {
  while (true) {
    Session();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(retry_ms_), [&] { return stop_; });
    if (stop_) return;
  }
}

void PrefixWatcher::Session() {
  absl::StatusOr<RangeResult> snap = client_->RangePrefix(prefix_);
  if (!snap.ok()) {
    TOKIMQ_LOG_WARN("etcd watch {}: {} (retrying)", prefix_, snap.status().ToString());
    return;
  }
  {
    WatchBatch batch;
    batch.snapshot = true;
    batch.revision = snap->revision;
    for (KeyValue& kv : snap->kvs) batch.events.push_back({WatchEvent::Type::kPut, std::move(kv)});
    on_batch_(batch);
    snapshots_.fetch_add(1);
  }
  grpc::ClientContext ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    cancel_ = &ctx;
  }
  EtcdClient::Impl& impl = *client_->impl_;
  EtcdClient::Impl::Endpoint& ep = impl.endpoints[impl.current.load() % impl.endpoints.size()];
  auto stream = ep.watch->Watch(&ctx);
  pb::WatchRequest req;
  pb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(prefix_);
  create->set_range_end(PrefixEnd(prefix_));
  create->set_start_revision(snap->revision + 1);
  pb::WatchResponse resp;
  if (stream->Write(req)) {
    while (stream->Read(&resp)) {
      if (resp.canceled() || resp.compact_revision() > 0) break;  // re-sync from a snapshot
      if (resp.events_size() == 0) continue;
      WatchBatch batch;
      batch.revision = resp.header().revision();
      for (const mvccpb::Event& e : resp.events()) {
        WatchEvent ev;
        ev.type = e.type() == mvccpb::Event::DELETE ? WatchEvent::Type::kDelete
                                                     : WatchEvent::Type::kPut;
        ev.kv = FromPb(e.kv());
        batch.events.push_back(std::move(ev));
      }
      on_batch_(batch);
    }
  }
  ctx.TryCancel();
  grpc::Status st = stream->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_ = nullptr;
    if (stop_) return;
  }
  TOKIMQ_LOG_WARN("etcd watch {} on {} ended ({}): re-syncing", prefix_, ep.address,
                  st.ok() ? std::string("closed") : st.error_message());
}

}  // namespace tokimq::cluster
