// Router: maps an HTTP method and path to a Handler, for the broker's HTTP port (HttpServer,
// http_server.h): /metrics, /healthz, /readyz and the web console's routes.
//
// Matching: an exact route (Add) for the request's path wins; else the route registered with
// AddPrefix whose prefix is the longest one the path starts with. A path that some route
// matches under another method gets 405 with an Allow header (RFC 9110 15.5.6); a path nothing
// matches gets 404. A GET route also answers HEAD (the server then sends no body). A handler
// that throws gets 500 (the exception stops here).
//
// Thread-safety: Add / AddPrefix and Dispatch may be called concurrently from any thread, so
// routes can be added while the server runs (the console adds its routes once the Broker is
// open, after the server started for /healthz). Handlers run on the HTTP server's threads,
// several at once; they may block briefly (call Broker methods), never for long: every request
// of the port shares the server's few threads.
#pragma once

#include <functional>
#include <map>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

namespace tokimq::http {

struct Request {
  std::string method;  // "GET", "POST", ... as sent (case-sensitive, RFC 9110 9.1)
  std::string path;    // percent-decoded, without the query
  // The query's key=value pairs, percent-decoded ('+' is a space); a repeated key keeps its
  // last value; a key without '=' maps to "".
  std::map<std::string, std::string> query;
  std::string body;           // at most HttpServerOptions::max_body_bytes
  std::string authorization;  // the Authorization header, "" if none
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers, in order
};

using Handler = std::function<Response(const Request&)>;

class Router {
 public:
  // Exact path match. A second handler for the same method and path replaces the first.
  void Add(std::string method, std::string path, Handler handler);
  // Every path that starts with `prefix` (e.g. "/api/"); the longest matching prefix wins.
  void AddPrefix(std::string method, std::string prefix, Handler handler);
  // The handler's answer, or 404 / 405 when nothing matches, or 500 when the handler threw.
  Response Dispatch(const Request& request) const;

 private:
  // The handler of `method` in `routes` (GET serves HEAD), or nullptr.
  static const Handler* Find(const std::map<std::string, Handler>& routes,
                             const std::string& method);
  static void AddAllowed(const std::map<std::string, Handler>& routes,
                         std::vector<std::string>* allowed);

  mutable std::shared_mutex mu_;
  std::map<std::string, std::map<std::string, Handler>> exact_;     // path -> method -> handler
  std::map<std::string, std::map<std::string, Handler>> prefixes_;  // prefix -> method -> handler
};

// Plain-text answers the router and the server use.
Response TextResponse(int status, std::string body);

}  // namespace tokimq::http
