// Router (broker/src/http/http_router.h): exact routes before prefixes, the longest prefix
// wins, 404 / 405 with Allow, GET serves HEAD, a throwing handler gets 500.
#include "http/http_router.h"
#include "http/http_server.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tokimq::http {
namespace {

Handler Answer(std::string body) {
  return [body](const Request&) { return TextResponse(200, body); };
}

Request Req(std::string method, std::string path) {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

TEST(HttpRouterTest, ExactRouteWinsOverPrefixAndLongestPrefixWins) {
  Router router;
  router.AddPrefix("GET", "/", Answer("root"));
  router.AddPrefix("GET", "/api/", Answer("api"));
  router.AddPrefix("GET", "/api/dlq/", Answer("dlq"));
  router.Add("GET", "/api/dlq/list", Answer("exact"));
  EXPECT_EQ(router.Dispatch(Req("GET", "/api/dlq/list")).body, "exact");
  EXPECT_EQ(router.Dispatch(Req("GET", "/api/dlq/other")).body, "dlq");
  EXPECT_EQ(router.Dispatch(Req("GET", "/api/topics")).body, "api");
  EXPECT_EQ(router.Dispatch(Req("GET", "/index.html")).body, "root");
}

TEST(HttpRouterTest, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  Router router;
  router.Add("GET", "/metrics", Answer("m"));
  router.Add("POST", "/api/resend", Answer("r"));
  const Response missing = router.Dispatch(Req("GET", "/nope"));
  EXPECT_EQ(missing.status, 404);
  const Response wrong = router.Dispatch(Req("DELETE", "/metrics"));
  EXPECT_EQ(wrong.status, 405);
  ASSERT_EQ(wrong.headers.size(), 1u);
  EXPECT_EQ(wrong.headers[0].first, "Allow");
  EXPECT_EQ(wrong.headers[0].second, "GET, HEAD");
  EXPECT_EQ(router.Dispatch(Req("GET", "/api/resend")).status, 405);
  EXPECT_EQ(router.Dispatch(Req("POST", "/api/resend")).body, "r");
}

TEST(HttpRouterTest, PrefixWithOtherMethodFallsBackToShorterPrefix) {
  Router router;
  router.AddPrefix("GET", "/", Answer("static"));
  router.AddPrefix("POST", "/api/", Answer("post"));
  EXPECT_EQ(router.Dispatch(Req("GET", "/api/x")).body, "static");
  EXPECT_EQ(router.Dispatch(Req("POST", "/api/x")).body, "post");
  EXPECT_EQ(router.Dispatch(Req("POST", "/other")).status, 405);
}

TEST(HttpRouterTest, GetRouteAnswersHead) {
  Router router;
  router.Add("GET", "/healthz", Answer("ok"));
  const Response r = router.Dispatch(Req("HEAD", "/healthz"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");  // the server drops the body of a HEAD answer
}

TEST(HttpRouterTest, ThrowingHandlerGets500) {
  Router router;
  router.Add("GET", "/boom", [](const Request&) -> Response { throw std::runtime_error("x"); });
  EXPECT_EQ(router.Dispatch(Req("GET", "/boom")).status, 500);
}

TEST(HttpRouterTest, SecondAddReplacesTheHandler) {
  Router router;
  router.Add("GET", "/a", Answer("1"));
  router.Add("GET", "/a", Answer("2"));
  EXPECT_EQ(router.Dispatch(Req("GET", "/a")).body, "2");
}

TEST(HttpRouterTest, ParseTargetDecodesPathAndQuery) {
  Request r;
  ASSERT_TRUE(ParseTarget("/api/msg%20id?topic=a%2Fb&key=x+y&flag&=skip&topic=c", &r));
  EXPECT_EQ(r.path, "/api/msg id");
  EXPECT_EQ(r.query.at("topic"), "c");  // the last value of a repeated key
  EXPECT_EQ(r.query.at("key"), "x y");
  EXPECT_EQ(r.query.at("flag"), "");
  EXPECT_FALSE(ParseTarget("/bad%2", &r));
  EXPECT_FALSE(ParseTarget("/bad%zz", &r));
  EXPECT_FALSE(ParseTarget("relative", &r));
  EXPECT_FALSE(ParseTarget("/q?x=%G0", &r));
}

}  // namespace
}  // namespace tokimq::http
