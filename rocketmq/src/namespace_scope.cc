#include "namespace_scope.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "apache/rocketmq/v2/definition.pb.h"
#include "common/namespace.h"
#include "convert.h"

namespace tokimq::rocketmq {
namespace {

namespace pb = ::google::protobuf;
using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;
using grpc::experimental::ServerRpcInfo;

constexpr char kNamespaceHeader[] = "x-mq-namespace";

// Whether a message of type `d` can hold a Resource at some depth (map fields are skipped:
// RocketMQ's maps hold strings only). Computed once per type and thread (a few dozen types; no
// lock on the calls' path).
bool MayHoldResource(const pb::Descriptor* d) {
  thread_local std::map<const pb::Descriptor*, bool> known;
  std::function<bool(const pb::Descriptor*)> visit = [&](const pb::Descriptor* t) {
    if (t == ::apache::rocketmq::v2::Resource::descriptor()) return true;
    auto [it, inserted] = known.emplace(t, false);  // false while visiting: cycles end here
    if (!inserted) return it->second;
    bool holds = false;
    for (int i = 0; i < t->field_count(); ++i) {
      const pb::FieldDescriptor* f = t->field(i);
      if (f->message_type() != nullptr && !f->is_map() && visit(f->message_type())) holds = true;
    }
    known[t] = holds;
    return holds;
  };
  return visit(d);
}

// Calls fn on every Resource of `m`; stops early when fn returns false.
bool ForEachResource(pb::Message* m, const std::function<bool(v2::Resource*)>& fn);

bool VisitField(pb::Message* m, const pb::FieldDescriptor* f,
                const std::function<bool(v2::Resource*)>& fn) {
  const pb::Reflection* r = m->GetReflection();
  if (f->is_repeated()) {
    for (int i = 0; i < r->FieldSize(*m, f); ++i) {
      if (!ForEachResource(r->MutableRepeatedMessage(m, f, i), fn)) return false;
    }
    return true;
  }
  return ForEachResource(r->MutableMessage(m, f), fn);
}

bool ForEachResource(pb::Message* m, const std::function<bool(v2::Resource*)>& fn) {
  if (m->GetDescriptor() == v2::Resource::descriptor()) {
    return fn(static_cast<v2::Resource*>(m));
  }
  if (!MayHoldResource(m->GetDescriptor())) return true;
  std::vector<const pb::FieldDescriptor*> fields;
  m->GetReflection()->ListFields(*m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (f->message_type() == nullptr || f->is_map() || !MayHoldResource(f->message_type())) {
      continue;
    }
    if (!VisitField(m, f, fn)) return false;
  }
  return true;
}

class NamespaceScope final : public grpc::experimental::Interceptor {
 public:
  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      if (auto* md = methods->GetRecvInitialMetadata(); md != nullptr) {
        auto it = md->find(kNamespaceHeader);
        if (it != md->end()) call_namespace_.assign(it->second.data(), it->second.size());
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (void* m = methods->GetRecvMessage(); m != nullptr) {
        WrapResources(call_namespace_, static_cast<pb::Message*>(m));
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      const void* m = methods->GetSendMessage();
      if (m != nullptr && HoldsNamespacedResource(*static_cast<const pb::Message*>(m))) {
        const auto& original = *static_cast<const pb::Message*>(m);
        std::unique_ptr<pb::Message> answer(original.New());
        answer->CopyFrom(original);
        UnwrapResources(answer.get());
        methods->ModifySendMessage(answer.get());
        methods->GetSerializedSendMessage();  // serialized now: `answer` may go
      }
    }
    methods->Proceed();
  }

 private:
  std::string call_namespace_;
};

class NamespaceScopeFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo*) override {
    return new NamespaceScope();  // owned and deleted by gRPC at the end of the call
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeNamespaceScopeFactory() {
  return std::make_unique<NamespaceScopeFactory>();
}

void WrapResources(std::string_view call_namespace, pb::Message* m) {
  ForEachResource(m, [&](v2::Resource* r) {
    const std::string_view ns =
        r->resource_namespace().empty() ? call_namespace : r->resource_namespace();
    if (!ns.empty()) r->set_name(WrapName(ns, r->name()));
    r->clear_resource_namespace();
    return true;
  });
}

bool HoldsNamespacedResource(const pb::Message& m) {
  bool found = false;
  // Read-only walk: ForEachResource takes a mutable message, but fn changes nothing.
  ForEachResource(const_cast<pb::Message*>(&m), [&](v2::Resource* r) {
    found = !NamespaceOf(r->name()).empty();
    return !found;
  });
  return found;
}

void UnwrapResources(pb::Message* m) {
  ForEachResource(m, [](v2::Resource* r) {
    const std::string ns(NamespaceOf(r->name()));
    if (ns.empty()) return true;
    r->set_name(WithoutNamespace(r->name()));
    r->set_resource_namespace(ns);
    return true;
  });
}

}  // namespace tokimq::rocketmq
