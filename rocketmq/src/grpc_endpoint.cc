#include "rocketmq/grpc_endpoint.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "call_trace.h"
#include "common/logging.h"
#include "messaging_service.h"
#include "namespace_scope.h"

namespace tokimq::rocketmq {
namespace {

class GrpcEndpointImpl final : public GrpcEndpoint {
 public:
  GrpcEndpointImpl(std::unique_ptr<MessagingServiceImpl> service,
                   std::unique_ptr<grpc::Server> server, int port)
      : service_(std::move(service)), server_(std::move(server)), port_(port) {}
  ~GrpcEndpointImpl() override { Shutdown(); }

  int port() const override { return port_; }

  void Shutdown() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (server_ == nullptr) return;
    // Streams still open after a second (telemetry sessions) are cancelled; running long polls
    // are waited for.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
    TOKIMQ_LOG_INFO("rocketmq gRPC endpoint on port {} stopped", port_);
  }

 private:
  std::mutex mu_;
  std::unique_ptr<MessagingServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  const int port_;
};

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError("cannot read TLS file " + path);
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const GrpcEndpointOptions& options) {
  if (options.tls_cert_file.empty() && options.tls_key_file.empty()) {
    return grpc::InsecureServerCredentials();
  }
  absl::StatusOr<std::string> cert = ReadPem(options.tls_cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(options.tls_key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcEndpoint>> StartGrpcEndpoint(broker::Broker* broker,
                                                                GrpcEndpointOptions options) {
  if (broker == nullptr) return absl::InvalidArgumentError("broker is null");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError("gRPC port must be 0..65535");
  }
  if (options.max_threads < 2) return absl::InvalidArgumentError("max_threads must be >= 2");
  const std::string target = options.address + ":" + std::to_string(options.port);
  auto service = std::make_unique<MessagingServiceImpl>(broker, options);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(target, *credentials, &bound_port);
  builder.RegisterService(service.get());
  grpc::ResourceQuota quota("tokimq-rocketmq");
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(options.max_body_size + (1 << 20));
  // gRPC sets SO_REUSEPORT by default: a second broker would then share the port silently and
  // clients would be balanced across two unrelated brokers. Binding a taken port must fail.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Keep idle client connections (telemetry streams) checked, as RocketMQ's proxy does.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Namespaces on every call (namespace_scope.h); with --log-level debug also one log line
  // per call event (call_trace.h).
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(MakeNamespaceScopeFactory());
  if (spdlog::should_log(spdlog::level::debug)) creators.push_back(MakeCallTraceFactory());
  builder.experimental().SetInterceptorCreators(std::move(creators));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError("cannot listen for RocketMQ gRPC on " + target);
  }
  TOKIMQ_LOG_INFO("rocketmq gRPC endpoint (apache.rocketmq.v2.MessagingService) on {}:{}{}",
                  options.address, bound_port, options.tls_cert_file.empty() ? "" : " (TLS)");
  return std::unique_ptr<GrpcEndpoint>(
      new GrpcEndpointImpl(std::move(service), std::move(server), bound_port));
}

}  // namespace tokimq::rocketmq
