// The web console (issue 18 items 4-5): one page and its JSON API on the broker's HTTP port.
//
// AddRoutes registers, on the HTTP router (broker/src/http/http_router.h):
//   GET  /, /console.js, /console.css   the page, shipped inside the binary (broker/console/)
//   GET  /api/overview /api/topics /api/groups /api/timer /api/dlq?group=G[&from=N&limit=N]
//        /api/message?id=ID | ?key=KEY
//   POST /api/dlq/resend {"group","offset"}   /api/recall {"handle"}
// Every figure is computed from the broker's Stats answer (Broker::Handle) or read from its
// stores; docs/console.md lists each field. Errors answer JSON {"error": "..."} with the HTTP
// status of the absl code (400 invalid argument, 401/403 auth, 404 not found, 409 failed
// precondition, 500 else).
//
// Auth (docs/console.md "Auth"): GETs are open, as /metrics. With --auth on, a POST needs HTTP
// Basic credentials "access key:secret key" of an enabled user with admin on `*` (the
// permission the native recall and the admin requests need, docs/security.md); 401 without
// them, 403 for a user without that permission.
//
// Thread-safety: the handlers may run on any number of threads at once; the Broker must
// outlive the router.
#pragma once

#include <cstdint>

#include "http/http_router.h"

namespace tokimq {
class Clock;
}

namespace tokimq::broker {
class Broker;
}

namespace tokimq::broker::console {

struct ConsoleOptions {
  // Uptime and send rates are measured on this clock (real time, not the broker's message
  // clock, which may be a manual one). nullptr: SystemClock::Default(). Not owned.
  Clock* clock = nullptr;
};

void AddRoutes(http::Router& router, Broker& broker, ConsoleOptions options = {});

}  // namespace tokimq::broker::console
