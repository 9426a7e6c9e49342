#include "call_trace.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"

namespace tokimq::rocketmq {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;
using grpc::experimental::ServerRpcInfo;

std::atomic<uint64_t> next_call_id{1};

// "/apache.rocketmq.v2.MessagingService/QueryRoute" -> "QueryRoute".
std::string ShortMethod(const char* method) {
  std::string m = method == nullptr ? "?" : method;
  const size_t slash = m.rfind('/');
  return slash == std::string::npos ? m : m.substr(slash + 1);
}

class CallTrace final : public grpc::experimental::Interceptor {
 public:
  explicit CallTrace(ServerRpcInfo* info)
      : id_(next_call_id.fetch_add(1, std::memory_order_relaxed)),
        method_(ShortMethod(info->method())),
        start_(RealTimeNow()) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (spdlog::should_log(spdlog::level::debug)) Log(methods);
    methods->Proceed();
  }

 private:
  void Log(InterceptorBatchMethods* methods) {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      std::string client = "?";
      if (auto* md = methods->GetRecvInitialMetadata(); md != nullptr) {
        auto it = md->find("x-mq-client-id");
        if (it != md->end()) client.assign(it->second.data(), it->second.size());
      }
      TOKIMQ_LOG_DEBUG("rocketmq call {}: opened {} by {}", id_, method_, client);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      const void* m = methods->GetRecvMessage();
      if (m != nullptr) {
        TOKIMQ_LOG_DEBUG("rocketmq call {}: got {} {}", id_, method_,
                         DescribeMessage(*static_cast<const google::protobuf::Message*>(m)));
      } else {
        TOKIMQ_LOG_DEBUG("rocketmq call {}: half-closed {}", id_, method_);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      const void* m = methods->GetSendMessage();
      TOKIMQ_LOG_DEBUG("rocketmq call {}: sent {} {}", id_, method_,
                       m == nullptr
                           ? std::string("(serialized)")
                           : DescribeMessage(*static_cast<const google::protobuf::Message*>(m)));
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status s = methods->GetSendStatus();
      TOKIMQ_LOG_DEBUG("rocketmq call {}: finished {} {} after {} us", id_, method_,
                       static_cast<int>(s.error_code()), RealTimeMicrosSince(start_));
    }
  }

  const uint64_t id_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
};

class CallTraceFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override {
    return new CallTrace(info);  // owned and deleted by gRPC at the end of the call
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeCallTraceFactory() {
  return std::make_unique<CallTraceFactory>();
}

std::string DescribeMessage(const google::protobuf::Message& m) {
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  std::string out = m.GetDescriptor()->name() + "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ", ";
    out += fields[i]->name();
  }
  out += "}";
  const google::protobuf::FieldDescriptor* status = m.GetDescriptor()->FindFieldByName("status");
  if (status != nullptr && status->message_type() != nullptr && !status->is_repeated() &&
      r->HasField(m, status)) {
    const google::protobuf::Message& s = r->GetMessage(m, status);
    const google::protobuf::FieldDescriptor* code = s.GetDescriptor()->FindFieldByName("code");
    if (code != nullptr && code->enum_type() != nullptr) {
      out += " " + s.GetReflection()->GetEnum(s, code)->name();
    }
  }
  return out;
}

}  // namespace tokimq::rocketmq
