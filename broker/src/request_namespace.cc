#include "request_namespace.h"

#include <string>

#include "common/namespace.h"

namespace tokimq::broker {
namespace {

void Wrap(std::string_view ns, std::string* name) {
  if (!name->empty()) *name = WrapName(ns, *name);
}

void Unwrap(std::string_view ns, std::string* name) { *name = UnwrapFor(ns, *name); }

bool InNamespace(std::string_view ns, const std::string& stored) {
  return NamespaceOf(stored) == ns;
}

// Stats in a namespace: the namespace's stored names are contiguous in byte order (they all
// start with "<ns>%"), so a page starts after "<ns>%" and ends where the namespace ends.
std::string PageStart(std::string_view ns, const std::string& after) {
  return after.empty() ? std::string(ns) + kNamespaceSeparator : WrapName(ns, after);
}
void PageNext(std::string_view ns, std::string* next) {
  if (next->empty()) return;
  *next = InNamespace(ns, *next) ? WithoutNamespace(*next) : std::string();
}

// Keeps the entries of `list` whose name (`name_of`) is in `ns`, in order, unwrapped.
template <typename Repeated, typename NameOf>
void KeepNamespace(std::string_view ns, Repeated* list, NameOf name_of) {
  int kept = 0;
  for (int i = 0; i < list->size(); ++i) {
    std::string* name = name_of(list->Mutable(i));
    if (!InNamespace(ns, *name)) continue;
    Unwrap(ns, name);
    if (kept != i) list->SwapElements(kept, i);
    ++kept;
  }
  while (list->size() > kept) list->RemoveLast();
}

void ScopeStats(std::string_view ns, proto::StatsRequest* s) {
  s->set_topics_after(PageStart(ns, s->topics_after()));
  s->set_groups_after(PageStart(ns, s->groups_after()));
}

void UnscopeStats(std::string_view ns, proto::StatsResponse* s) {
  KeepNamespace(ns, s->mutable_topics(), [](proto::TopicStats* t) { return t->mutable_name(); });
  KeepNamespace(ns, s->mutable_groups(), [](proto::GroupStats* g) { return g->mutable_group(); });
  for (proto::GroupStats& g : *s->mutable_groups()) {
    for (std::string& t : *g.mutable_topics()) Unwrap(ns, &t);
    for (proto::GroupTopicStats& t : *g.mutable_topic_stats()) Unwrap(ns, t.mutable_topic());
  }
  PageNext(ns, s->mutable_next_topics_after());
  PageNext(ns, s->mutable_next_groups_after());
}

void UnscopeMessages(std::string_view ns,
                     google::protobuf::RepeatedPtrField<proto::ReceivedMessage>* messages) {
  for (proto::ReceivedMessage& m : *messages) Unwrap(ns, m.mutable_topic());
}

}  // namespace

void ScopeRequest(std::string_view ns, proto::Request* req) {
  switch (req->body_case()) {
    case proto::Request::kCreateTopic:
      return Wrap(ns, req->mutable_create_topic()->mutable_topic()->mutable_name());
    case proto::Request::kUpdateTopic:
      return Wrap(ns, req->mutable_update_topic()->mutable_topic()->mutable_name());
    case proto::Request::kDeleteTopic:
      return Wrap(ns, req->mutable_delete_topic()->mutable_name());
    case proto::Request::kDescribeTopic:
      return Wrap(ns, req->mutable_describe_topic()->mutable_name());
    case proto::Request::kSend:
      for (proto::SendEntry& e : *req->mutable_send()->mutable_entries()) {
        Wrap(ns, e.mutable_topic());
      }
      return;
    case proto::Request::kReceive:
      Wrap(ns, req->mutable_receive()->mutable_group());
      Wrap(ns, req->mutable_receive()->mutable_topic());
      req->mutable_receive()->set_encoded_properties(false);
      return;
    case proto::Request::kAck:
      return Wrap(ns, req->mutable_ack()->mutable_group());
    case proto::Request::kChangeInvisibleDuration:
      return Wrap(ns, req->mutable_change_invisible_duration()->mutable_group());
    case proto::Request::kNack:
      return Wrap(ns, req->mutable_nack()->mutable_group());
    case proto::Request::kStats:
      return ScopeStats(ns, req->mutable_stats());
    case proto::Request::kEndTransaction:
      return Wrap(ns, req->mutable_end_transaction()->mutable_topic());
    case proto::Request::kPollTransactionChecks:
      for (std::string& t : *req->mutable_poll_transaction_checks()->mutable_topics()) {
        Wrap(ns, &t);
      }
      return;
    case proto::Request::kCreateGroup:
      return Wrap(ns, req->mutable_create_group()->mutable_group()->mutable_name());
    case proto::Request::kUpdateGroup:
      return Wrap(ns, req->mutable_update_group()->mutable_group()->mutable_name());
    case proto::Request::kDescribeGroup:
      return Wrap(ns, req->mutable_describe_group()->mutable_name());
    case proto::Request::kRoute:
      return Wrap(ns, req->mutable_route()->mutable_topic());
    case proto::Request::kPull:
      Wrap(ns, req->mutable_pull()->mutable_group());
      return Wrap(ns, req->mutable_pull()->mutable_topic());
    case proto::Request::kGetOffset:
      Wrap(ns, req->mutable_get_offset()->mutable_group());
      return Wrap(ns, req->mutable_get_offset()->mutable_topic());
    case proto::Request::kUpdateOffset:
      Wrap(ns, req->mutable_update_offset()->mutable_group());
      return Wrap(ns, req->mutable_update_offset()->mutable_topic());
    case proto::Request::kQueryOffset:
      return Wrap(ns, req->mutable_query_offset()->mutable_topic());
    default:
      return;  // broker-wide requests, or no names (recall: the handle names its message)
  }
}

void UnscopeResponse(std::string_view ns, proto::Request::BodyCase kind, proto::Response* resp) {
  switch (resp->body_case()) {
    case proto::Response::kTopic:
      return Unwrap(ns, resp->mutable_topic()->mutable_topic()->mutable_name());
    case proto::Response::kListTopics:
      return KeepNamespace(ns, resp->mutable_list_topics()->mutable_topics(),
                           [](proto::TopicConfig* t) { return t->mutable_name(); });
    case proto::Response::kSend:
      for (proto::SendResult& r : *resp->mutable_send()->mutable_results()) {
        Unwrap(ns, r.mutable_topic());
      }
      return;
    case proto::Response::kReceive:
      return UnscopeMessages(ns, resp->mutable_receive()->mutable_messages());
    case proto::Response::kPull:
      return UnscopeMessages(ns, resp->mutable_pull()->mutable_messages());
    case proto::Response::kStats:
      if (kind == proto::Request::kStats) UnscopeStats(ns, resp->mutable_stats());
      return;
    case proto::Response::kGroup:
      return Unwrap(ns, resp->mutable_group()->mutable_group()->mutable_name());
    case proto::Response::kTransactionChecks:
      for (proto::TransactionCheck& c : *resp->mutable_transaction_checks()->mutable_checks()) {
        Unwrap(ns, c.mutable_topic());
      }
      return;
    case proto::Response::kRoute:
      return Unwrap(ns, resp->mutable_route()->mutable_topic()->mutable_name());
    default:
      return;
  }
}

}  // namespace tokimq::broker
