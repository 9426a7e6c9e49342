#include "http/http_router.h"

#include <algorithm>
#include <exception>
#include <mutex>

#include "common/logging.h"

namespace tokimq::http {

Response TextResponse(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

void Router::Add(std::string method, std::string path, Handler handler) {
  std::unique_lock<std::shared_mutex> l(mu_);
  exact_[std::move(path)][std::move(method)] = std::move(handler);
}

void Router::AddPrefix(std::string method, std::string prefix, Handler handler) {
  std::unique_lock<std::shared_mutex> l(mu_);
  prefixes_[std::move(prefix)][std::move(method)] = std::move(handler);
}

const Handler* Router::Find(const std::map<std::string, Handler>& routes,
                            const std::string& method) {
  auto it = routes.find(method);
  if (it == routes.end() && method == "HEAD") it = routes.find("GET");
  return it == routes.end() ? nullptr : &it->second;
}

void Router::AddAllowed(const std::map<std::string, Handler>& routes,
                        std::vector<std::string>* allowed) {
  for (const auto& [method, handler] : routes) {
    allowed->push_back(method);
    if (method == "GET") allowed->push_back("HEAD");
  }
}

Response Router::Dispatch(const Request& request) const {
  Handler handler;
  std::vector<std::string> allowed;
  {
    std::shared_lock<std::shared_mutex> l(mu_);
    // Candidates, most specific first: the exact route, then the prefixes by length.
    std::vector<const std::map<std::string, Handler>*> candidates;
    if (auto it = exact_.find(request.path); it != exact_.end()) {
      candidates.push_back(&it->second);
    }
    std::vector<std::pair<size_t, const std::map<std::string, Handler>*>> by_length;
    for (const auto& [prefix, routes] : prefixes_) {
      if (request.path.compare(0, prefix.size(), prefix) == 0) {
        by_length.emplace_back(prefix.size(), &routes);
      }
    }
    std::sort(by_length.begin(), by_length.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [length, routes] : by_length) candidates.push_back(routes);
    for (const auto* routes : candidates) {
      if (const Handler* h = Find(*routes, request.method)) {
        handler = *h;  // a copy: called outside the lock
        break;
      }
      AddAllowed(*routes, &allowed);
    }
  }
  if (!handler) {
    if (allowed.empty()) return TextResponse(404, "not found: " + request.path + "\n");
    std::sort(allowed.begin(), allowed.end());
    allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    std::string allow;
    for (const std::string& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
    Response r = TextResponse(405, "method " + request.method + " not allowed on " +
                                       request.path + "\n");
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  try {
    return handler(request);
  } catch (const std::exception& e) {
    TOKIMQ_LOG_ERROR("http: {} {} threw: {}", request.method, request.path, e.what());
    return TextResponse(500, "internal error\n");
  }
}

}  // namespace tokimq::http
