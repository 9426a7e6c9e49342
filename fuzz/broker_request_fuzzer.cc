// Fuzz target: request decoding and dispatch against an in-process broker
// (proto/framing.h + broker/broker.h Broker::Handle / HandleReceiveFrame).
//
// One Broker runs for many inputs, on a manual clock, in a temp dir ($TOKIMQ_FUZZ_TMPDIR, else
// /dev/shm or /tmp), with topics "t" (NORMAL, 4 queues), "d" (DELAY) and "f" (FIFO) created at
// start; it is closed and reopened on an empty dir every kRecycleInputs inputs so disk use and
// state stay bounded. Each input is a byte stream as a client would send it (4-byte big-endian
// length, serialized Request; at most 8 frames), taken as the server does: a length above the
// frame limit, a truncated frame or bytes that do not parse end the stream.
// Properties: every response carries the request id; it has a body exactly when its status is
// OK; no request, however malformed, gets INTERNAL, DATA_LOSS or UNKNOWN (those mean the broker
// broke, not the client); a response always fits a frame and parses back; a successful Send
// answers every entry with a message id; the encoded receive frame parses as a Response with
// the request id and as many messages as it says.
#include <unistd.h>

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "broker/broker.h"
#include "common/logging.h"
#include "fuzz_check.h"
#include "proto/framing.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {
namespace {

constexpr int kRecycleInputs = 5000;
constexpr int kMaxFramesPerInput = 8;

std::string g_dir;
Broker* g_broker = nullptr;  // never deleted at exit: reachable, so not a leak
int g_uses = 0;

void CreateTopic(Broker* b, const char* name, proto::TopicType type, int queues) {
  proto::Request req;
  req.set_id(1);
  auto* t = req.mutable_create_topic()->mutable_topic();
  t->set_name(name);
  t->set_type(type);
  t->set_queues(queues);
  proto::Response resp;
  b->Handle(req, &resp);
  FUZZ_CHECK(!resp.has_status() || resp.status().code() == 0);
}

void CleanUp() {
  if (g_broker != nullptr) {
    (void)g_broker->Close();
    delete g_broker;
    g_broker = nullptr;
  }
  if (!g_dir.empty()) std::filesystem::remove_all(g_dir);
}

Broker* GetBroker() {
  if (g_broker != nullptr && g_uses < kRecycleInputs) {
    ++g_uses;
    return g_broker;
  }
  if (g_broker != nullptr) {
    absl::Status closed = g_broker->Close();
    if (!closed.ok()) std::fprintf(stderr, "broker close: %s\n", closed.ToString().c_str());
    FUZZ_CHECK(closed.ok());
    delete g_broker;
    g_broker = nullptr;
  }
  if (g_dir.empty()) {
    const char* base = std::getenv("TOKIMQ_FUZZ_TMPDIR");
    std::string root = base != nullptr ? base : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    g_dir = root + "/tokimq-fuzz-broker-" + std::to_string(getpid());
  }
  std::filesystem::remove_all(g_dir);
  BrokerOptions o;
  o.data_dir = g_dir;
  o.manual_clock = true;
  o.manual_clock_start_ms = 1'700'000'000'000;
  o.commitlog_segment_size = 4u << 20;
  o.max_message_size = 64u << 10;
  o.timer_precision_ms = 1000;
  o.timer_window_ms = 3600 * 1000;
  o.timer_thread_nice = 0;
  o.retention_interval_ms = 0;
  o.max_long_poll_ms = 0;  // a long poll would only wait for the manual clock's real timeout
  absl::StatusOr<std::unique_ptr<Broker>> b = Broker::Open(o);
  if (!b.ok()) std::fprintf(stderr, "broker open: %s\n", b.status().ToString().c_str());
  FUZZ_CHECK(b.ok());
  g_broker = b->release();
  static bool registered = false;
  if (!registered) {
    // After the first open: RocksDB's function-local statics exist by now, so this handler
    // runs before they are destroyed (it closes the broker, which still logs through them).
    std::atexit(CleanUp);
    registered = true;
  }
  CreateTopic(g_broker, "t", proto::NORMAL, 4);
  CreateTopic(g_broker, "d", proto::DELAY, 1);
  CreateTopic(g_broker, "f", proto::FIFO, 2);
  g_uses = 1;
  return g_broker;
}

bool BrokenBroker(int code) {
  return code == static_cast<int>(absl::StatusCode::kInternal) ||
         code == static_cast<int>(absl::StatusCode::kDataLoss) ||
         code == static_cast<int>(absl::StatusCode::kUnknown);
}

void CheckResponse(const proto::Request& req, const proto::Response& resp) {
  FUZZ_CHECK(resp.id() == req.id());
  const bool ok = !resp.has_status() || resp.status().code() == 0;
  if (!ok && BrokenBroker(resp.status().code())) {
    std::fprintf(stderr, "request %d answered %d: %s\n", static_cast<int>(req.body_case()),
                 resp.status().code(), resp.status().message().c_str());
  }
  FUZZ_CHECK(ok || !BrokenBroker(resp.status().code()));
  FUZZ_CHECK(ok == (resp.body_case() != proto::Response::BODY_NOT_SET));
  absl::StatusOr<std::string> frame = wire::EncodeFrame(resp);
  FUZZ_CHECK(frame.ok());
  proto::Response back;
  FUZZ_CHECK(wire::DecodeFrameBody(std::string_view(*frame).substr(wire::kFrameHeaderBytes), &back).ok());
  FUZZ_CHECK(back.id() == req.id());
  if (ok && req.body_case() == proto::Request::kSend) {
    FUZZ_CHECK(resp.send().results_size() == req.send().entries_size());
    for (const proto::SendResult& r : resp.send().results()) FUZZ_CHECK(!r.message_id().empty());
  }
  if (ok && req.body_case() == proto::Request::kAck) {
    FUZZ_CHECK(resp.ack().results_size() == req.ack().receipt_handles_size());
    for (const proto::Status& s : resp.ack().results()) FUZZ_CHECK(!BrokenBroker(s.code()));
  }
}

void Dispatch(Broker* b, const proto::Request& req) {
  if (auto encoded = b->HandleReceiveFrame(req)) {
    if (!encoded->status.ok()) {
      FUZZ_CHECK(!BrokenBroker(static_cast<int>(encoded->status.code())));
      FUZZ_CHECK(encoded->frame.empty());
      return;
    }
    absl::StatusOr<uint32_t> len = wire::DecodeFrameHeader(encoded->frame.data(), wire::kDefaultMaxFrameBytes);
    FUZZ_CHECK(len.ok() && *len + wire::kFrameHeaderBytes == encoded->frame.size());
    proto::Response resp;
    FUZZ_CHECK(wire::DecodeFrameBody(std::string_view(encoded->frame).substr(wire::kFrameHeaderBytes), &resp).ok());
    FUZZ_CHECK(resp.id() == req.id());
    FUZZ_CHECK(resp.receive().messages_size() == encoded->messages);
    return;
  }
  proto::Response resp;
  b->Handle(req, &resp);
  CheckResponse(req, resp);
}

}  // namespace
}  // namespace tokimq::broker

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::err);
  google::protobuf::SetLogHandler(nullptr);  // one "invalid UTF-8" line per such input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq;
  using namespace tokimq::broker;
  Broker* b = GetBroker();
  std::string_view in = fuzz::AsView(data, size);
  for (int n = 0; n < kMaxFramesPerInput && in.size() >= wire::kFrameHeaderBytes; ++n) {
    absl::StatusOr<uint32_t> len = wire::DecodeFrameHeader(in.data(), wire::kDefaultMaxFrameBytes);
    if (!len.ok()) return 0;
    in.remove_prefix(wire::kFrameHeaderBytes);
    if (in.size() < *len) return 0;
    proto::Request req;
    absl::Status parsed = wire::DecodeFrameBody(in.substr(0, *len), &req);
    in.remove_prefix(*len);
    if (!parsed.ok()) return 0;
    Dispatch(b, req);
  }
  return 0;
}
