// Broker::HandleRecall: a native Recall (docs/protocol.md "Recall"). A recall naming its topic
// (RecallRequest.topic; the RocketMQ endpoint sets it, also when it forwards a RecallMessage to
// the broker that issued the handle: docs/cluster.md "gRPC routing") was authorized for pub on
// that topic only, so the handle's message must be of that topic: another topic's message is
// answered as an unknown handle (NOT_FOUND), telling the caller nothing about it.
// With replication = "sync" a recall is answered only once a follower holds its delete marker
// (UNAVAILABLE after replication_ack_timeout without one; the recall stands on the leader).
#include "broker/broker.h"
#include "commitlog/message_store.h"
#include "common/property_keys.h"
#include "common/status.h"
#include "replication/replication_service.h"
#include "timerstore/recall_handle.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker {

absl::Status Broker::HandleRecall(const proto::RecallRequest& req) {
  if (!req.topic().empty()) {
    absl::StatusOr<RecallHandle> h = RecallHandle::Decode(req.recall_handle());
    if (!h.ok()) return h.status();
    // A record given up by retention cannot be read: the timer store decides (it checks what
    // is left to check).
    absl::StatusOr<Message> m = store_->Read(PhysicalOffset(h->physical_offset));
    if (m.ok()) {
      auto real = m->properties.find(prop::kRealTopic);
      const std::string& topic = real != m->properties.end() ? real->second : m->topic;
      if (topic != req.topic()) {
        return absl::NotFoundError("recall: no scheduled message of topic '" + req.topic() +
                                   "' for handle");
      }
    }
  }
  TOKIMQ_RETURN_IF_ERROR(timers_->Recall(req.recall_handle()));
  // replication = "sync": answered once a follower holds the recall's delete marker, as a sync
  // send (docs/replication.md "Ack modes"); UNAVAILABLE otherwise, the recall standing here.
  return replication_->AwaitReplicated();
}

}  // namespace tokimq::broker
