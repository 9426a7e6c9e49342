#include "http/http_endpoint.h"

#include "http/metrics_collector.h"

namespace tokimq::http {

HttpEndpoint::HttpEndpoint(HttpServerOptions options) : server_(&router_, std::move(options)) {
  router_.Add("GET", "/healthz", [](const Request&) { return TextResponse(200, "ok\n"); });
  router_.Add("GET", "/readyz", [this](const Request&) {
    return ready_.load() ? TextResponse(200, "ready\n") : TextResponse(503, "not ready\n");
  });
  router_.Add("GET", "/metrics", [this](const Request&) { return Metrics(); });
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

absl::Status HttpEndpoint::Start() { return server_.Start(); }

void HttpEndpoint::Stop() {
  ready_.store(false);
  server_.Stop();
}

Response HttpEndpoint::Metrics() const {
  broker::Broker* broker = broker_.load();
  if (broker == nullptr) return TextResponse(503, "broker not open yet (recovery)\n");
  absl::StatusOr<std::string> text = RenderMetrics(*broker);
  if (!text.ok()) return TextResponse(500, std::string(text.status().message()) + "\n");
  Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";  // Prometheus text format
  r.body = std::move(*text);
  return r;
}

}  // namespace tokimq::http
