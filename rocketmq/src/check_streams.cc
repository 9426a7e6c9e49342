#include "check_streams.h"

#include <vector>

namespace tokimq::rocketmq {

uint64_t CheckStreams::Register(Writer writer) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  streams_[id].writer = std::move(writer);
  return id;
}

void CheckStreams::SetTopics(uint64_t id, std::set<std::string> topics) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(id);
  if (it != streams_.end()) it->second.topics = std::move(topics);
}

void CheckStreams::Unregister(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(id);
}

bool CheckStreams::Offer(const std::string& topic,
                         const apache::rocketmq::v2::TelemetryCommand& cmd) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Stream*> candidates;
  for (auto& [id, s] : streams_) {
    if (s.topics.contains(topic)) candidates.push_back(&s);
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    Stream* s = candidates[(turn_ + i) % candidates.size()];
    if (s->writer(cmd)) {
      turn_ += i + 1;
      return true;
    }
  }
  return false;
}

}  // namespace tokimq::rocketmq
