// HttpEndpoint: the broker process's HTTP port (issue 18): one Router, the HttpServer serving
// it, and the routes every broker has: /healthz, /readyz and /metrics.
//
//   GET /healthz  200 "ok" as soon as the port listens (the process runs; start-up included).
//   GET /readyz   200 "ready" once SetReady(true): recovery done and the native port serving
//                 (main calls it after both); 503 "not ready" before, and again from the start
//                 of a shutdown.
//   GET /metrics  Prometheus text format (metrics_collector.h, docs/metrics.md), computed from
//                 the Broker at each scrape; 503 until SetBroker (recovery still running).
// Other routes (the web console) are added to router() by whoever owns them; see the hook in
// broker/main/main.cc.
//
// Lifetime and threads: main owns it. Start() before Broker::Open so health answers during
// recovery; SetBroker after Open; Stop() before the Broker closes (handlers call it). SetReady
// and SetBroker may be called from any thread; handlers run on the server's threads.
#pragma once

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "http/http_router.h"
#include "http/http_server.h"

namespace tokimq::broker {
class Broker;
}

namespace tokimq::http {

class HttpEndpoint {
 public:
  explicit HttpEndpoint(HttpServerOptions options);
  ~HttpEndpoint();

  Router& router() { return router_; }
  absl::Status Start();
  void Stop();
  uint16_t port() const { return server_.port(); }

  void SetBroker(broker::Broker* broker) { broker_.store(broker); }
  void SetReady(bool ready) { ready_.store(ready); }

 private:
  Response Metrics() const;

  Router router_;
  HttpServer server_;
  std::atomic<broker::Broker*> broker_{nullptr};
  std::atomic<bool> ready_{false};
};

}  // namespace tokimq::http
