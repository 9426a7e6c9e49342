// Router: the broker HTTP port's table of handlers (exact paths and path prefixes).
//
// Placeholder of the [obs] branch's router with the agreed interface, so that the console's
// handlers can be written and unit-tested (through Dispatch) before that branch lands; the
// merge takes obs's version of this file.
// Thread-safety: Add/AddPrefix before serving; Dispatch from any number of threads.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tokimq::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::map<std::string, std::string> query;  // decoded
  std::string body;
  std::string authorization;  // the Authorization header, as sent
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

using Handler = std::function<Response(const Request&)>;

class Router {
 public:
  void Add(std::string method, std::string path, Handler handler);
  void AddPrefix(std::string method, std::string prefix, Handler handler);
  // Exact path first, then the longest matching prefix; 404 when no path matches, 405 when
  // one matches for another method.
  Response Dispatch(const Request& req) const;

 private:
  std::map<std::pair<std::string, std::string>, Handler> exact_;
  std::map<std::pair<std::string, std::string>, Handler> prefix_;
};

}  // namespace tokimq::http
