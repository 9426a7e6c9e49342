// CallTrace: a debug log of every gRPC call of the RocketMQ endpoint, written as a gRPC server
// interceptor so that no RPC handler has to log by hand and no call is left out.
//
// One line per event, at spdlog's debug level, each starting "rocketmq call <n>" (n counts
// calls since the process started, so the lines of one call can be grepped together):
//   opened    <Method> by <x-mq-client-id>            the call's headers arrived
//   got       <Method> <Type>{<set fields>}           a request message was read
//   sent      <Method> <Type>{<set fields>} <code>    an answer message goes out (code: the
//                                                     RocketMQ status in it, when it has one)
//   half-closed <Method>                              the client ended its side of a stream
//   finished  <Method> <gRPC code> after <us> us      the status goes out
// A telemetry session thus shows "got TelemetryCommand{settings}" and, for every settings
// command, "sent TelemetryCommand{status, settings} OK": a missing answer or a call that never
// finishes is visible per client.
//
// Installed by StartGrpcEndpoint only when the broker logs at debug level when it starts
// (`--log-level debug`); with any other level the server has no interceptor at all.
// Thread-safety: gRPC creates one interceptor per call and calls it from one thread at a time;
// the call counter is atomic.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>

namespace google::protobuf {
class Message;
}

namespace tokimq::rocketmq {

// Creates one CallTrace interceptor per call.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeCallTraceFactory();

// "<Type>{<names of the set top-level fields>}" plus " <code>" when the message has a set
// `status` field with a `code` (e.g. "QueryRouteResponse{status, message_queues} OK").
// Exposed for tests.
std::string DescribeMessage(const google::protobuf::Message& m);

}  // namespace tokimq::rocketmq
