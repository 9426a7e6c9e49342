#include "client/admin.h"

namespace tokimq::client {

absl::StatusOr<proto::TopicConfig> AdminClient::CreateTopic(const proto::TopicConfig& topic,
                                                            const std::vector<std::string>& brokers) {
  proto::Request req;
  *req.mutable_create_topic()->mutable_topic() = topic;
  for (const std::string& b : brokers) req.mutable_create_topic()->add_brokers(b);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->topic().topic();
}

absl::StatusOr<proto::TopicResponse> AdminClient::UpdateTopic(
    const proto::TopicConfig& topic, const std::vector<std::string>& add_brokers) {
  proto::Request req;
  *req.mutable_update_topic()->mutable_topic() = topic;
  for (const std::string& b : add_brokers) req.mutable_update_topic()->add_add_brokers(b);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->topic();
}

absl::StatusOr<proto::RouteResponse> AdminClient::Route(const std::string& topic) {
  proto::Request req;
  req.mutable_route()->set_topic(topic);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->route();
}

absl::StatusOr<proto::ClusterStatusResponse> AdminClient::ClusterStatus() {
  proto::Request req;
  req.mutable_cluster_status();
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->cluster_status();
}

absl::StatusOr<proto::GroupStatusResponse> AdminClient::GroupStatus() {
  proto::Request req;
  req.mutable_group_status();
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->group_status();
}

absl::Status AdminClient::DeleteTopic(const std::string& name) {
  proto::Request req;
  req.mutable_delete_topic()->set_name(name);
  return conn_.Call(std::move(req)).status();
}

absl::StatusOr<std::vector<proto::TopicConfig>> AdminClient::ListTopics() {
  proto::Request req;
  req.mutable_list_topics();
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return std::vector<proto::TopicConfig>(resp->list_topics().topics().begin(),
                                         resp->list_topics().topics().end());
}

absl::StatusOr<proto::TopicResponse> AdminClient::DescribeTopic(const std::string& name) {
  proto::Request req;
  req.mutable_describe_topic()->set_name(name);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->topic();
}

absl::StatusOr<proto::StatsResponse> AdminClient::Stats(const proto::StatsRequest& request) {
  proto::Request req;
  *req.mutable_stats() = request;
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->stats();
}

absl::Status AdminClient::TimerCheckpoint() {
  proto::Request req;
  req.mutable_timer_checkpoint();
  return conn_.Call(std::move(req)).status();
}

absl::StatusOr<int64_t> AdminClient::AdvanceClock(int64_t advance_ms) {
  proto::Request req;
  req.mutable_advance_clock()->set_advance_ms(advance_ms);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->advance_clock().now_ms();
}

absl::StatusOr<proto::HandshakeResponse> AdminClient::Ping() {
  auto conn = conn_.Get();
  if (!conn.ok()) return conn.status();
  return (*conn)->handshake();
}

absl::StatusOr<proto::GroupConfig> AdminClient::CreateGroup(const proto::GroupConfig& group) {
  proto::Request req;
  *req.mutable_create_group()->mutable_group() = group;
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->group().group();
}

absl::StatusOr<proto::GroupConfig> AdminClient::UpdateGroup(const proto::GroupConfig& group) {
  proto::Request req;
  *req.mutable_update_group()->mutable_group() = group;
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->group().group();
}

absl::StatusOr<proto::GroupConfig> AdminClient::DescribeGroup(const std::string& name) {
  proto::Request req;
  req.mutable_describe_group()->set_name(name);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->group().group();
}

absl::Status AdminClient::CreateUser(const proto::CreateUserRequest& user) {
  proto::Request req;
  *req.mutable_create_user() = user;
  return conn_.Call(std::move(req)).status();
}

absl::Status AdminClient::DeleteUser(const std::string& access_key) {
  proto::Request req;
  req.mutable_delete_user()->set_access_key(access_key);
  return conn_.Call(std::move(req)).status();
}

absl::StatusOr<std::vector<proto::UserInfo>> AdminClient::ListUsers() {
  proto::Request req;
  req.mutable_list_users();
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return std::vector<proto::UserInfo>(resp->list_users().users().begin(),
                                      resp->list_users().users().end());
}

absl::Status AdminClient::GrantAcl(const proto::AclRuleInfo& rule) {
  proto::Request req;
  *req.mutable_grant_acl()->mutable_rule() = rule;
  return conn_.Call(std::move(req)).status();
}

absl::Status AdminClient::RevokeAcl(const std::string& access_key, const std::string& resource) {
  proto::Request req;
  req.mutable_revoke_acl()->set_access_key(access_key);
  req.mutable_revoke_acl()->set_resource(resource);
  return conn_.Call(std::move(req)).status();
}

absl::StatusOr<std::vector<proto::AclRuleInfo>> AdminClient::ListAcl(const std::string& access_key) {
  proto::Request req;
  req.mutable_list_acl()->set_access_key(access_key);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return std::vector<proto::AclRuleInfo>(resp->list_acl().rules().begin(),
                                         resp->list_acl().rules().end());
}

}  // namespace tokimq::client
