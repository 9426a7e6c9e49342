// console::AddRoutes: the page, its files and the JSON API on the HTTP router (console.h).
#include <memory>
#include <mutex>
#include <string_view>

#include "absl/strings/escaping.h"
#include "broker/auth/auth_store.h"
#include "broker/broker.h"
#include "common/clock.h"
#include "common/parse_int.h"
#include "console/console.h"
#include "console/console_assets.h"
#include "console/message_json.h"
#include "console/rate_tracker.h"
#include "console/stats_json.h"
#include "openssl/crypto.h"
#include "proto/status.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker::console {
namespace {

using nlohmann::json;

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    default:
      return 500;
  }
}

http::Response JsonResponse(const json& j, int status = 200) {
  http::Response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = j.dump();
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

http::Response ErrorResponse(const absl::Status& s) {
  http::Response r = JsonResponse(json{{"error", std::string(s.message())}}, HttpStatusOf(s.code()));
  if (s.code() == absl::StatusCode::kUnauthenticated) {
    r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"tokimq\"");
  }
  return r;
}

http::Response Answer(const absl::StatusOr<json>& j) {
  return j.ok() ? JsonResponse(*j) : ErrorResponse(j.status());
}

const char* ContentTypeOf(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// What the handlers share; lives as long as the router's handlers (shared_ptr in each).
struct Console {
  Broker* broker;
  Clock* clock;
  int64_t start_ms;
  std::mutex mu;
  RateTracker topic_rates;    // mu
  RateTracker release_rate;   // mu

  absl::StatusOr<proto::StatsResponse> Stats() const {
    proto::Request req;
    req.mutable_stats()->set_omit_queues(true);
    proto::Response resp;
    broker->Handle(req, &resp);
    if (resp.has_status() && resp.status().code() != 0) return wire::FromProto(resp.status());
    return std::move(*resp.mutable_stats());
  }

  // Sends per second of each topic (TopicStats.messages_sent, counted at send: a delayed
  // message counts when sent, not when released).
  std::map<std::string, double> TopicRates(const proto::StatsResponse& st) {
    std::map<std::string, int64_t> counts;
    for (const proto::TopicStats& t : st.topics()) counts[t.name()] = t.messages_sent();
    std::lock_guard<std::mutex> l(mu);
    return topic_rates.Update(clock->NowMs(), counts);
  }
  double ReleaseRate(const proto::StatsResponse& st) {
    std::lock_guard<std::mutex> l(mu);
    return release_rate.Update(clock->NowMs(), {{"released", st.timer().delivered()}})["released"];
  }

  // With --auth: HTTP Basic "AK:SK" of an enabled user with admin on `*`.
  absl::Status CheckAdmin(const http::Request& req) const {
    if (!broker->auth_enabled()) return absl::OkStatus();
    constexpr std::string_view kBasic = "Basic ";
    std::string decoded;
    if (!req.authorization.starts_with(kBasic) ||
        !absl::Base64Unescape(absl::string_view(req.authorization.data() + kBasic.size(),
                                               req.authorization.size() - kBasic.size()),
                              &decoded)) {
      return absl::UnauthenticatedError("this action needs an admin user (HTTP Basic AK:SK)");
    }
    const size_t colon = decoded.find(':');
    const std::string ak = decoded.substr(0, colon);
    std::optional<auth::User> user = broker->auth_store()->GetUser(ak);
    const std::string sk = colon == std::string::npos ? "" : decoded.substr(colon + 1);
    if (!user || !user->enabled || user->secret_key.size() != sk.size() ||
        CRYPTO_memcmp(user->secret_key.data(), sk.data(), sk.size()) != 0) {
      return absl::UnauthenticatedError("wrong access key or secret key");
    }
    if (!broker->auth_store()->Allows(ak, auth::Resource::Cluster(), auth::kAdmin)) {
      return absl::PermissionDeniedError("console actions need admin on '*'");
    }
    return absl::OkStatus();
  }
};

absl::StatusOr<json> ParseBody(const http::Request& req) {
  json j = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  return j;
}

// `def` when the parameter is absent; INVALID_ARGUMENT (400) when it is not a 64-bit integer.
absl::StatusOr<int64_t> QueryInt(const http::Request& req, const char* name, int64_t def) {
  auto it = req.query.find(name);
  if (it == req.query.end()) return def;
  int64_t v = 0;
  if (!ParseInt64(it->second, &v)) {
    return absl::InvalidArgumentError(std::string(name) + " must be an integer");
  }
  return v;
}

std::string QueryString(const http::Request& req, const char* name) {
  auto it = req.query.find(name);
  return it == req.query.end() ? std::string() : it->second;
}

void AddApiReads(http::Router& router, const std::shared_ptr<Console>& c) {
  router.Add("GET", "/api/overview", [c](const http::Request&) {
    absl::StatusOr<proto::StatsResponse> st = c->Stats();
    if (!st.ok()) return ErrorResponse(st.status());
    OverviewExtras x;
    x.version = "tokimq " TOKIMQ_VERSION;
    x.uptime_ms = c->clock->NowMs() - c->start_ms;
    x.manual_clock = c->broker->manual_clock();
    for (const auto& [topic, rate] : c->TopicRates(*st)) x.sent_per_s += rate;
    x.released_per_s = c->ReleaseRate(*st);
    return JsonResponse(OverviewJson(*st, x));
  });
  router.Add("GET", "/api/topics", [c](const http::Request&) {
    absl::StatusOr<proto::StatsResponse> st = c->Stats();
    if (!st.ok()) return ErrorResponse(st.status());
    return JsonResponse(TopicsJson(*st, c->TopicRates(*st)));
  });
  router.Add("GET", "/api/groups", [c](const http::Request&) {
    absl::StatusOr<proto::StatsResponse> st = c->Stats();
    return st.ok() ? JsonResponse(GroupsJson(*st)) : ErrorResponse(st.status());
  });
  router.Add("GET", "/api/timer", [c](const http::Request&) {
    absl::StatusOr<proto::StatsResponse> st = c->Stats();
    if (!st.ok()) return ErrorResponse(st.status());
    const TimerStore* timers = c->broker->timer_store();
    return JsonResponse(TimerJson(*st, timers->PendingByDueTime(60'000, 60),
                                  timers->PendingByDueTime(3'600'000, 168)));
  });
  router.Add("GET", "/api/dlq", [c](const http::Request& req) {
    absl::StatusOr<int64_t> from = QueryInt(req, "from", -1);
    absl::StatusOr<int64_t> limit = QueryInt(req, "limit", 50);
    if (!from.ok()) return ErrorResponse(from.status());
    if (!limit.ok()) return ErrorResponse(limit.status());
    // The page's range (1..kMaxDlqPage) is DlqJson's rule.
    return Answer(DlqJson(*c->broker, QueryString(req, "group"), *from, static_cast<int>(*limit)));
  });
  router.Add("GET", "/api/message", [c](const http::Request& req) {
    return Answer(LookupJson(*c->broker, QueryString(req, "id"), QueryString(req, "key")));
  });
}

void AddApiActions(http::Router& router, const std::shared_ptr<Console>& c) {
  router.Add("POST", "/api/dlq/resend", [c](const http::Request& req) {
    if (absl::Status s = c->CheckAdmin(req); !s.ok()) return ErrorResponse(s);
    absl::StatusOr<json> body = ParseBody(req);
    if (!body.ok()) return ErrorResponse(body.status());
    if (!body->value("group", json()).is_string() || !body->value("offset", json()).is_number_integer()) {
      return ErrorResponse(absl::InvalidArgumentError("expected {\"group\": string, \"offset\": integer}"));
    }
    return Answer(ResendFromDlq(*c->broker, (*body)["group"].get<std::string>(),
                                (*body)["offset"].get<int64_t>()));
  });
  router.Add("POST", "/api/recall", [c](const http::Request& req) {
    if (absl::Status s = c->CheckAdmin(req); !s.ok()) return ErrorResponse(s);
    absl::StatusOr<json> body = ParseBody(req);
    if (!body.ok()) return ErrorResponse(body.status());
    if (!body->value("handle", json()).is_string()) {
      return ErrorResponse(absl::InvalidArgumentError("expected {\"handle\": string}"));
    }
    return Answer(RecallJson(*c->broker, (*body)["handle"].get<std::string>()));
  });
}

void AddAssets(http::Router& router) {
  for (const Asset& a : ConsoleAssets()) {
    auto serve = [a](const http::Request&) {
      http::Response r;
      r.content_type = ContentTypeOf(a.name);
      r.body = std::string(a.body);
      return r;
    };
    std::string path = "/";  // not "/" + std::string(..): GCC 12's false -Wrestrict at -O3
    path += a.name;
    router.Add("GET", path, serve);
    if (a.name == "index.html") router.Add("GET", "/", serve);
  }
}

}  // namespace

void AddRoutes(http::Router& router, Broker& broker, ConsoleOptions options) {
  auto c = std::make_shared<Console>();
  c->broker = &broker;
  c->clock = options.clock != nullptr ? options.clock : SystemClock::Default();
  c->start_ms = c->clock->NowMs();
  AddApiReads(router, c);
  AddApiActions(router, c);
  AddAssets(router);
}

}  // namespace tokimq::broker::console
