#include "replication/group_state_serving.h"

#include "common/logging.h"
#include "common/status.h"
#include "consumer/consumer_service_impl.h"

namespace tokimq::broker {

bool ReplicatesGroupState(const BrokerOptions& o) {
  return o.broker_id != 0 || !o.replicate_from.empty() || o.replication_sync ||
         o.replication_explicit || o.replication_elected || o.replication_deposed;
}

absl::Status ServeGroupState(GroupStateLog* log, ConsumerService* consumers, bool promoted) {
  if (log == nullptr) return absl::OkStatus();
  if (promoted) {
    TOKIMQ_RETURN_IF_ERROR(log->CatchUp());
    auto* impl = dynamic_cast<consumer::ConsumerServiceImpl*>(consumers);
    if (impl == nullptr) return absl::InternalError("consumer service cannot reload its state");
    TOKIMQ_RETURN_IF_ERROR(impl->ReloadState());
    TOKIMQ_LOG_INFO("replication: consumer-group state reloaded after {} group-state records",
                    log->replay_next());
  }
  log->SetLeading(true);
  return log->AppendSnapshot();
}

}  // namespace tokimq::broker
