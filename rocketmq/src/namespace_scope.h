// NamespaceScope: RocketMQ namespaces on the gRPC endpoint (issue 22 item 6), as a gRPC server
// interceptor, so that no RPC handler deals with them and no RPC is left out.
//
// Every apache.rocketmq.v2.Resource (topic or group) a client sends is wrapped for its
// namespace before the handler reads it: the resource's own `resource_namespace` when set (the
// Java and Go clients set it on every resource), else the call's `x-mq-namespace` header (the
// Node.js client 1.0.8 sets resource_namespace only on its producer's topics, the header on
// every call). The name becomes the stored name ("ns%topic", "%DLQ%ns%group": common/
// namespace.h) and resource_namespace is cleared, so handlers, ACLs, stores and the native
// broker see one name per resource. Every Resource of an answer is unwrapped the other way:
// the name without its namespace, resource_namespace set to it (RocketMQ's
// GrpcConverter.buildResource).
//
// A bad namespace is wrapped all the same: the wrapped name then fails the name rule
// (common/names.h), so the handler answers ILLEGAL_TOPIC / ILLEGAL_CONSUMER_GROUP with the
// namespace rule in the message, as for any illegal name.
//
// Installed by StartGrpcEndpoint on every call. Thread-safety: gRPC creates one interceptor per
// call and calls it from one thread at a time; the functions below are pure.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string_view>

namespace google::protobuf {
class Message;
}

namespace tokimq::rocketmq {

// Creates one NamespaceScope interceptor per call.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeNamespaceScopeFactory();

// Wraps every v2.Resource in `m` (at any depth) for `call_namespace` or its own
// resource_namespace, which is cleared. Exposed for tests.
void WrapResources(std::string_view call_namespace, google::protobuf::Message* m);
// True when some v2.Resource of `m` has a stored name with a namespace (UnwrapResources would
// change `m`).
bool HoldsNamespacedResource(const google::protobuf::Message& m);
// Splits every namespaced v2.Resource name of `m` into resource_namespace and name.
void UnwrapResources(google::protobuf::Message* m);

}  // namespace tokimq::rocketmq
