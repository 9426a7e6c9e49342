#include "connection.h"

#include "broker/broker.h"
#include "common/hand_off_batch.h"
#include "common/logging.h"
#include "common/namespace.h"
#include "proto/status.h"
#include "replication/replication_service.h"
#include "request_namespace.h"

namespace tokimq::broker {

namespace asio = boost::asio;
using asio::ip::tcp;

// Shared by the connection's I/O thread (parse) and a worker (Handle, serialize); freed with
// the last reference.
struct Call {
  google::protobuf::Arena arena;
  proto::Request* request = google::protobuf::Arena::CreateMessage<proto::Request>(&arena);
  // A receive that carried acks: they are applied once, on its first try (HandleToFrame), and
  // their results answered with whatever try answers the receive (after its long poll, on a
  // worker). `ack_wait_end`: the CommitLog end a follower must hold before that answer (sync
  // replication; 0: none), kept from the first try.
  bool acks_taken = false;
  std::vector<absl::Status> ack_results;
  PhysicalOffset ack_wait_end = PhysicalOffset(0);
};

Connection::Connection(const ConnectionContext* context, asio::io_context* io, tcp::socket socket)
    : context_(context),
      io_(io),
      stream_(std::move(socket)),
      auth_(context->broker->auth_enabled() ? context->broker->auth_store() : nullptr) {}

void Connection::Start() {
  stream_.Open(context_->options->tls_mode, context_->tls,
               [self = shared_from_this()](boost::system::error_code ec) {
                 if (ec) {
                   TOKIMQ_LOG_DEBUG("closing {}: TLS or first read: {}", self->peer(),
                                    ec.message());
                   return self->Close();
                 }
                 self->ReadHeader();
               });
}

void Connection::Close() {
  if (closed_) return;
  closed_ = true;
  stream_.Close();
  context_->forget(this);
}

void Connection::Drain() {
  if (closed_) return;
  draining_ = true;
  stream_.ShutdownReceive();  // a pending read ends (EOF)
  CloseIfDrained();
}

void Connection::CloseIfDrained() {
  if (draining_ && in_flight_ == 0 && !writing_ && out_.empty()) Close();
}

void Connection::ReadHeader() {
  if (closed_ || close_after_write_) return;
  if (draining_) return CloseIfDrained();
  if (in_flight_ >= context_->options->max_in_flight_per_connection) {
    paused_ = true;
    return;
  }
  stream_.AsyncRead(asio::buffer(header_, sizeof(header_)),
                    [self = shared_from_this()](boost::system::error_code ec, size_t) {
                      self->OnHeader(ec);
                    });
}

void Connection::OnHeader(boost::system::error_code ec) {
  if (ec) return draining_ ? CloseIfDrained() : Close();  // EOF, reset, or a truncated header
  absl::StatusOr<uint32_t> len =
      wire::DecodeFrameHeader(header_, context_->options->max_frame_bytes);
  if (!len.ok()) {
    TOKIMQ_LOG_WARN("closing {}: {}", peer(), len.status().ToString());
    return FailAndClose(len.status());
  }
  // Bounded by the frame limit, checked above; not zero-filled (the read overwrites it all).
  body_ = std::make_unique_for_overwrite<char[]>(*len);
  body_len_ = *len;
  stream_.AsyncRead(asio::buffer(body_.get(), body_len_),
                    [self = shared_from_this()](boost::system::error_code ec, size_t) {
                      self->OnBody(ec);
                    });
}

void Connection::OnBody(boost::system::error_code ec) {
  if (ec) return draining_ ? CloseIfDrained() : Close();  // truncated frame
  // Request and response of one call live on one arena: their many small parts (entries,
  // strings, property maps) are arena allocations, freed at once with the call.
  auto call = std::make_shared<Call>();
  proto::Request* req = call->request;
  absl::Status parsed = wire::DecodeFrameBody(std::string_view(body_.get(), body_len_), req);
  body_.reset();
  body_len_ = 0;
  if (!parsed.ok()) {
    TOKIMQ_LOG_WARN("closing {}: {}", peer(), parsed.ToString());
    return FailAndClose(parsed);
  }
  // A namespaced connection's names become stored names here, before ACLs look at them.
  if (!namespace_.empty() && req->body_case() != proto::Request::kHandshake) {
    ScopeRequest(namespace_, req);
  }
  if (!AnswerConnectionLevel(*req)) Dispatch(std::move(call));
  ReadHeader();
}

bool Connection::AnswerConnectionLevel(const proto::Request& req) {
  if (req.body_case() == proto::Request::kHandshake) {
    AnswerHandshake(req);
    return true;
  }
  proto::Response resp;
  resp.set_id(req.id());
  if (!handshaken_) {
    wire::ToProto(absl::FailedPreconditionError("handshake required before any request"),
                  resp.mutable_status());
  } else if (req.body_case() == proto::Request::kAuthenticate) {
    AnswerAuthenticate(req);
    return true;
  } else if (absl::Status admitted = auth_.Admit(req); !admitted.ok()) {
    wire::ToProto(admitted, resp.mutable_status());
  } else {
    return false;
  }
  Enqueue(resp);
  return true;
}

void Connection::AnswerHandshake(const proto::Request& req) {
  proto::Response resp;
  const std::string& ns = req.handshake().resource_namespace();
  if (absl::Status bad = ns.empty() ? absl::OkStatus() : ValidateNamespace(ns); !bad.ok()) {
    resp.set_id(req.id());
    wire::ToProto(bad, resp.mutable_status());
    return Enqueue(resp);
  }
  if (handshaken_ && ns != namespace_) {
    // Requests already read were rewritten for the first namespace; one per connection.
    resp.set_id(req.id());
    wire::ToProto(absl::FailedPreconditionError("the connection's namespace is set once, at its "
                                                "first handshake"),
                  resp.mutable_status());
    return Enqueue(resp);
  }
  context_->broker->Handle(req, &resp);
  resp.mutable_handshake()->set_max_frame_bytes(context_->options->max_frame_bytes);
  if (resp.has_status() && resp.status().code() != 0) {
    resp.clear_body();
  } else {
    handshaken_ = true;
    namespace_ = ns;
    resp.mutable_handshake()->set_resource_namespace(ns);
    auth_.OnHandshake(req.handshake(), resp.mutable_handshake());
  }
  Enqueue(resp);
}

void Connection::AnswerAuthenticate(const proto::Request& req) {
  proto::Response resp;
  resp.set_id(req.id());
  absl::Status s = auth_.Authenticate(req.authenticate(), resp.mutable_authenticate());
  if (!s.ok()) {
    resp.clear_body();
    wire::ToProto(s, resp.mutable_status());
    if (absl::IsUnauthenticated(s)) {
      TOKIMQ_LOG_WARN("closing {}: authentication failed", peer());
      close_after_write_ = true;  // one attempt per connection (and per nonce)
    }
  }
  Enqueue(resp);
}

void Connection::Dispatch(std::shared_ptr<Call> call) {
  std::string frame;
  PhysicalOffset wait_end;
  if (TryInline(call.get(), &frame, &wait_end)) {
    if (wait_end <= PhysicalOffset(0)) return EnqueueFrame(std::move(frame));
    ++in_flight_;
    return CompleteWhenReplicated(call->request->id(), std::move(frame), wait_end);
  }
  ++in_flight_;
  if (call->request->body_case() == proto::Request::kSend) {
    // Stored here, on the I/O thread. flush = "sync" (or replication = sync): answered from
    // the group commit's sync thread (or the follower's ack); flush = "async": answered at
    // once. The hop to a worker and back cost two thread switches per send, most of the
    // broker's CPU for single-message sends (perf: scheduler and futex time), and the worker
    // had nothing to wait for. In async mode that hop was still taken until 2026-12-02:
    // 2.6 context switches and ~68 us of broker CPU per single-message send against 1.2 and
    // ~56 us with --flush sync (bench/cpu_per_send.sh; docs/performance.md "Round 4").
    return SendNoWait(std::move(call));
  }
  asio::post(*context_->workers, [self = shared_from_this(), call = std::move(call)]() mutable {
    // Handled and serialized here, on the worker, not on the connection's I/O thread.
    PhysicalOffset end;
    std::string frame = self->HandleToFrameDeferred(call.get(), nullptr, &end);
    if (call->ack_wait_end > end) end = call->ack_wait_end;
    if (end > PhysicalOffset(0)) {
      return self->CompleteWhenReplicated(call->request->id(), std::move(frame), end);
    }
    self->Complete(std::move(frame));
  });
}

void Connection::CompleteWhenReplicated(uint64_t id, std::string frame, PhysicalOffset end) {
  // On the pulling follower's request thread (its ack), the expiry thread (timeout) or here
  // (already held, or this broker lost its term): no thread waits meanwhile.
  context_->broker->replication()->WhenReplicated(
      end, [self = shared_from_this(), id, frame = std::move(frame),
            work = asio::make_work_guard(*context_->workers)](absl::Status st) mutable {
        if (!st.ok()) {
          // The error a blocking wait gives (docs/replication.md "Consumer-group state"): the
          // change stands on this broker, unacknowledged.
          proto::Response err;
          err.set_id(id);
          wire::ToProto(st, err.mutable_status());
          frame = EncodeResponse(err);
        }
        self->Complete(std::move(frame));
        work.reset();
      });
}

std::string Connection::HandleToFrameDeferred(Call* call, bool* empty_receive,
                                              PhysicalOffset* wait_end) {
  *wait_end = PhysicalOffset(0);
  ReplicationService::DeferStateWaits defer(wait_end);
  return HandleToFrame(call, empty_receive);
}

void Connection::SendNoWait(std::shared_ptr<Call> call) {
  proto::Response* resp = google::protobuf::Arena::CreateMessage<proto::Response>(&call->arena);
  const proto::Request* req = call->request;
  context_->broker->HandleNoWait(*req, resp,
                                 [self = shared_from_this(), call = std::move(call), resp,
                                  work = asio::make_work_guard(*context_->workers)]() mutable {
                                   if (!self->namespace_.empty()) {
                                     UnscopeResponse(self->namespace_, proto::Request::kSend,
                                                     resp);
                                   }
                                   self->Complete(EncodeResponse(*resp));
                                   work.reset();
                                 });
}

void Connection::Complete(std::string frame) {
  HandOffBatch::Task task = [self = shared_from_this(), frame = std::move(frame)]() mutable {
    self->Completed(std::move(frame));
  };
  // On the group commit's sync thread (a batch is open for the round): one post per I/O
  // thread carries every answer of the round for its connections (HandOffBatch).
  if (HandOffBatch::Add(io_, &PostCompletions, task)) return;
  asio::post(*io_, [task = std::move(task)]() mutable { std::move(task)(); });
}

void Connection::PostCompletions(void* io, std::vector<HandOffBatch::Task> tasks) {
  asio::post(*static_cast<asio::io_context*>(io), [tasks = std::move(tasks)]() mutable {
    for (HandOffBatch::Task& t : tasks) std::move(t)();
  });
}

void Connection::Completed(std::string frame) {
  --in_flight_;
  EnqueueFrame(std::move(frame));
  CloseIfDrained();
  if (paused_) {
    paused_ = false;
    ReadHeader();
  }
}

bool Connection::TryInline(Call* call, std::string* frame, PhysicalOffset* wait_end) {
  const proto::Request& req = *call->request;
  *wait_end = PhysicalOffset(0);
  // replication = sync: these are answered once a follower holds their group-state records
  // (docs/replication.md "Consumer-group state"); handled here all the same, their wait is
  // deferred to the ack tracker (HandleToFrameDeferred, CompleteWhenReplicated), so this
  // thread stays free.
  switch (req.body_case()) {
    case proto::Request::kAck:
    case proto::Request::kChangeInvisibleDuration:
    case proto::Request::kNack:
    case proto::Request::kReceive:
      break;
    default:
      return false;
  }
  const bool may_wait =
      req.body_case() == proto::Request::kReceive && req.receive().long_poll_ms() > 0;
  const int64_t long_poll_ms = may_wait ? req.receive().long_poll_ms() : 0;
  if (may_wait) call->request->mutable_receive()->set_long_poll_ms(0);
  bool empty = false;
  std::string answer = HandleToFrameDeferred(call, &empty, wait_end);
  if (may_wait && empty) {  // nothing leased: nothing to wait for but the acks it carried
    call->ack_wait_end = *wait_end;
    call->request->mutable_receive()->set_long_poll_ms(long_poll_ms);  // wait on a worker
    return false;
  }
  *frame = std::move(answer);
  return true;
}

std::string Connection::HandleToFrame(Call* call, bool* empty_receive) {
  const proto::Request& req = *call->request;
  proto::Response* resp = google::protobuf::Arena::CreateMessage<proto::Response>(&call->arena);
  if (req.body_case() == proto::Request::kReceive && req.receive().ack_receipt_handles_size() > 0) {
    // Applied here, once: a retry of this call after its long poll finds them cleared.
    absl::StatusOr<std::vector<absl::Status>> acks =
        context_->broker->TakeReceiveAcks(call->request->mutable_receive());
    if (!acks.ok()) {
      if (empty_receive) *empty_receive = false;
      resp->set_id(req.id());
      wire::ToProto(acks.status(), resp->mutable_status());
      return EncodeResponse(*resp);
    }
    call->acks_taken = true;
    call->ack_results = std::move(*acks);
  }
  const std::vector<absl::Status>* acks = call->acks_taken ? &call->ack_results : nullptr;
  if (auto encoded = context_->broker->HandleReceiveFrame(req, acks)) {
    if (encoded->status.ok()) {
      if (empty_receive) *empty_receive = encoded->messages == 0;
      return std::move(encoded->frame);
    }
    resp->set_id(req.id());  // the error response, as Handle answers one
    wire::ToProto(encoded->status, resp->mutable_status());
  } else {
    context_->broker->Handle(req, resp);
    if (acks != nullptr && resp->has_receive()) {
      resp->mutable_receive()->mutable_ack_results()->Reserve(static_cast<int>(acks->size()));
      for (const absl::Status& s : *acks) {
        wire::ToProto(s, resp->mutable_receive()->add_ack_results());
      }
    }
    auth_.Filter(req, resp);  // ListTopics / Stats: only what this user may see
    if (!namespace_.empty()) UnscopeResponse(namespace_, req.body_case(), resp);
  }
  if (empty_receive) {
    *empty_receive = req.body_case() == proto::Request::kReceive &&
                     !(resp->has_status() && resp->status().code() != 0) &&
                     resp->receive().messages_size() == 0;
  }
  return EncodeResponse(*resp);
}

void Connection::FailAndClose(const absl::Status& s) {
  proto::Response resp;
  resp.set_id(0);
  wire::ToProto(s, resp.mutable_status());
  Enqueue(resp);
  close_after_write_ = true;
}

std::string Connection::EncodeResponse(const proto::Response& resp) {
  absl::StatusOr<std::string> frame = wire::EncodeFrame(resp, UINT32_MAX);
  if (!frame.ok()) {
    proto::Response err;
    err.set_id(resp.id());
    wire::ToProto(frame.status(), err.mutable_status());
    frame = wire::EncodeFrame(err, UINT32_MAX);
    if (!frame.ok()) return std::string();
  }
  return std::move(*frame);
}

void Connection::EnqueueFrame(std::string frame) {
  if (closed_) return;
  if (frame.empty()) return Close();
  out_.push_back(std::move(frame));
  if (!writing_) Write();
}

void Connection::Write() {
  if (out_.empty()) {
    writing_ = false;
    if (close_after_write_) Close();
    CloseIfDrained();
    return;
  }
  writing_ = true;
  stream_.AsyncWrite(asio::buffer(out_.front()),
                     [self = shared_from_this()](boost::system::error_code ec, size_t) {
                       if (ec) return self->Close();
                       self->out_.pop_front();
                       self->Write();
                     });
}

}  // namespace tokimq::broker
