#include "broker/auth/permissions.h"

#include "broker/auth/auth_store.h"
#include "fmt/format.h"

namespace tokimq::broker::auth {
namespace {

Requirement Topic(const std::string& name, ActionSet any_of) {
  return {Resource::Topic(name), any_of};
}
Requirement Group(const std::string& name, ActionSet any_of) {
  return {Resource::Group(name), any_of};
}
Requirement Cluster(ActionSet any_of) { return {Resource::Cluster(), any_of}; }

bool Meets(const AuthStore& store, const std::string& ak, const Requirement& r) {
  for (Action a : {kPub, kSub, kAdmin}) {
    if ((r.any_of & a) != 0 && store.Allows(ak, r.resource, a)) return true;
  }
  return false;
}

}  // namespace

std::vector<Requirement> RequirementsOf(const proto::Request& req) {
  using R = proto::Request;
  switch (req.body_case()) {
    case R::kHandshake:
    case R::kAuthenticate:
    case R::kListTopics:  // filtered
    case R::kStats:       // filtered
    // Role, term, CommitLog ends and lag only; a candidate asks its peers without credentials
    // before campaigning (broker/src/group_election.h).
    case R::kGroupStatus:
    case R::BODY_NOT_SET:
      return {};
    case R::kCreateTopic:
      return {Topic(req.create_topic().topic().name(), kAdmin)};
    case R::kUpdateTopic:
      return {Topic(req.update_topic().topic().name(), kAdmin)};
    case R::kDeleteTopic:
      return {Topic(req.delete_topic().name(), kAdmin)};
    case R::kRoute:  // as describe: a producer or consumer of the topic
      return {Topic(req.route().topic(), kPub | kSub | kAdmin)};
    case R::kClusterStatus:
      return {Cluster(kAdmin)};
    case R::kDescribeTopic:  // RocketMQ's QueryRoute: pub or sub
      return {Topic(req.describe_topic().name(), kPub | kSub | kAdmin)};
    case R::kSend: {
      std::vector<Requirement> out;
      for (const proto::SendEntry& e : req.send().entries()) out.push_back(Topic(e.topic(), kPub));
      return out;
    }
    // Transactions (docs/transactions.md): RocketMQ's EndTransaction needs pub on the topic; the
    // check-back poll hands out half messages of its topics (bodies included), so it needs pub
    // on each, as the producer that sent them has.
    case R::kEndTransaction:
      return {Topic(req.end_transaction().topic(), kPub)};
    case R::kPollTransactionChecks: {
      std::vector<Requirement> out;
      for (const std::string& t : req.poll_transaction_checks().topics()) {
        out.push_back(Topic(t, kPub));
      }
      return out;
    }
    // The handle names no topic: pub on "*"; a recall naming its topic (the gRPC endpoint
    // forwarding a RecallMessage, issue 19) needs pub on it, as RecallMessage does, and the
    // broker checks that the handle's message is of that topic.
    case R::kRecall:
      if (!req.recall().topic().empty()) return {Topic(req.recall().topic(), kPub)};
      return {Cluster(kPub)};
    case R::kReceive:
      return {Group(req.receive().group(), kSub), Topic(req.receive().topic(), kSub)};
    // Offset-based consumption: as a receive (RocketMQ: sub on group and topic; QueryOffset
    // names no group: sub on the topic).
    case R::kPull:
      return {Group(req.pull().group(), kSub), Topic(req.pull().topic(), kSub)};
    case R::kGetOffset:
      return {Group(req.get_offset().group(), kSub), Topic(req.get_offset().topic(), kSub)};
    case R::kUpdateOffset:
      return {Group(req.update_offset().group(), kSub), Topic(req.update_offset().topic(), kSub)};
    case R::kQueryOffset:
      return {Topic(req.query_offset().topic(), kSub)};
    // The receipt handle binds group and topic and is checked against the group by the
    // consumer service; the topic's sub was checked when the handle was handed out.
    case R::kAck:
      return {Group(req.ack().group(), kSub)};
    case R::kChangeInvisibleDuration:
      return {Group(req.change_invisible_duration().group(), kSub)};
    case R::kNack:
      return {Group(req.nack().group(), kSub)};
    // Group configuration: admin on the group (RocketMQ: updateSubscriptionGroup is an admin
    // command); describing it, any action on the group (the RocketMQ endpoint's settings).
    case R::kCreateGroup:
      return {Group(req.create_group().group().name(), kAdmin)};
    case R::kUpdateGroup:
      return {Group(req.update_group().group().name(), kAdmin)};
    case R::kDescribeGroup:
      return {Group(req.describe_group().name(), kPub | kSub | kAdmin)};
    case R::kAdvanceClock:
    case R::kTimerCheckpoint:
    case R::kCreateUser:
    case R::kDeleteUser:
    case R::kListUsers:
    case R::kGrantAcl:
    case R::kRevokeAcl:
    case R::kListAcl:
    // Replication (docs/replication.md): a follower pulls the whole CommitLog, and the role
    // request is the election's: both are cluster administration.
    case R::kReplicatePull:
    case R::kReplicationRole:
      return {Cluster(kAdmin)};
  }
  return {Cluster(kAdmin)};  // a request this table does not know yet: admins only
}

absl::Status CheckRequirements(const AuthStore& store, const std::string& access_key,
                               const std::vector<Requirement>& requirements) {
  for (const Requirement& r : requirements) {
    if (!Meets(store, access_key, r)) {
      return absl::PermissionDeniedError(fmt::format("user '{}' has no {} permission on {}",
                                                     access_key, ActionsToString(r.any_of),
                                                     r.resource.ToString()));
    }
  }
  return absl::OkStatus();
}

absl::Status Authorize(const AuthStore& store, const std::string& access_key,
                       const proto::Request& req) {
  return CheckRequirements(store, access_key, RequirementsOf(req));
}

void FilterResponse(const AuthStore& store, const std::string& access_key,
                    const proto::Request& req, proto::Response* resp) {
  auto sees_topic = [&](const std::string& t) {
    return Meets(store, access_key, Topic(t, kPub | kSub | kAdmin));
  };
  if (req.body_case() == proto::Request::kListTopics && resp->has_list_topics()) {
    auto* topics = resp->mutable_list_topics()->mutable_topics();
    for (int i = topics->size() - 1; i >= 0; --i) {
      if (!sees_topic(topics->Get(i).name())) topics->DeleteSubrange(i, 1);
    }
  } else if (req.body_case() == proto::Request::kStats && resp->has_stats()) {
    auto* topics = resp->mutable_stats()->mutable_topics();
    for (int i = topics->size() - 1; i >= 0; --i) {
      if (!sees_topic(topics->Get(i).name())) topics->DeleteSubrange(i, 1);
    }
    auto* groups = resp->mutable_stats()->mutable_groups();
    for (int i = groups->size() - 1; i >= 0; --i) {
      if (!Meets(store, access_key, Group(groups->Get(i).group(), kSub | kAdmin))) {
        groups->DeleteSubrange(i, 1);
      }
    }
  }
}

}  // namespace tokimq::broker::auth
