// HttpEndpoint (broker/src/http/http_endpoint.h): /healthz answers from the start, /readyz only
// between SetReady(true) and a shutdown, /metrics 503 until the Broker is open; routes added
// while the server runs are served.
#include "http/http_endpoint.h"

#include <gtest/gtest.h>

#include "http_test_client.h"

namespace tokimq::http {
namespace {

using tokimq::testing::HttpGet;

TEST(HttpEndpointTest, ReadinessFollowsSetReadyAndMetricsWaitForTheBroker) {
  HttpServerOptions options;
  options.port = 0;
  HttpEndpoint endpoint(options);
  ASSERT_TRUE(endpoint.Start().ok());
  const uint16_t port = endpoint.port();

  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  const auto not_ready = HttpGet(port, "/readyz");
  EXPECT_EQ(not_ready.status, 503);  // recovery still running
  EXPECT_EQ(not_ready.body, "not ready\n");
  EXPECT_EQ(HttpGet(port, "/metrics").status, 503);  // no Broker yet

  endpoint.SetReady(true);
  const auto ready = HttpGet(port, "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ready\n");

  // The console's hook adds routes once the Broker is open, with the server running.
  endpoint.router().Add("GET", "/api/overview", [](const Request&) {
    Response r;
    r.content_type = "application/json";
    r.body = "{}";
    return r;
  });
  const auto added = HttpGet(port, "/api/overview");
  EXPECT_EQ(added.status, 200);
  EXPECT_EQ(added.headers.at("content-type"), "application/json");

  endpoint.SetReady(false);  // a shutdown began
  EXPECT_EQ(HttpGet(port, "/readyz").status, 503);
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
}

}  // namespace
}  // namespace tokimq::http
