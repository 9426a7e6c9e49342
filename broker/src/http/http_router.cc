#include "http/http_router.h"

namespace tokimq::http {

void Router::Add(std::string method, std::string path, Handler handler) {
  exact_[{std::move(method), std::move(path)}] = std::move(handler);
}

void Router::AddPrefix(std::string method, std::string prefix, Handler handler) {
  prefix_[{std::move(method), std::move(prefix)}] = std::move(handler);
}

Response Router::Dispatch(const Request& req) const {
  bool other_method = false;
  for (const auto& [key, handler] : exact_) {
    if (key.second != req.path) continue;
    if (key.first == req.method) return handler(req);
    other_method = true;
  }
  const Handler* best = nullptr;
  size_t best_len = 0;
  for (const auto& [key, handler] : prefix_) {
    if (req.path.compare(0, key.second.size(), key.second) != 0) continue;
    if (key.first != req.method) {
      other_method = true;
      continue;
    }
    if (best == nullptr || key.second.size() > best_len) {
      best = &handler;
      best_len = key.second.size();
    }
  }
  if (best != nullptr) return (*best)(req);
  Response r;
  r.status = other_method ? 405 : 404;
  r.body = other_method ? "method not allowed\n" : "not found\n";
  return r;
}

}  // namespace tokimq::http
