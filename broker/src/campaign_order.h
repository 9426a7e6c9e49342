// CampaignsBefore: the order in which the replicas of a broker group go for leadership in the
// etcd election (GroupElection::MayCampaign, docs/cluster.md "Broker groups",
// docs/replication.md "A stale replica does not lead"). A replica campaigns only when no live
// registered peer goes before it.
//
// Order: the longer CommitLog first (it holds every write a shorter one holds: in sync mode
// every acknowledged write is on some follower, and the longest live log keeps it); at equal
// ends, a replica whose consumer-group state is not marked stale before one whose state is
// (a rejoin cut moved its replay position back and no leader's snapshot was replayed since:
// its "group/" keys may hold unacknowledged writes of the cut tail); then the lower broker id.
// So a stale replica leads only when every live peer is stale too or holds a shorter log:
// decided over RocketMQ 5's rule (only a SyncStateSet member is elected, else no leader unless
// unclean election is on) because a shorter log would drop bytes, acknowledged sends among
// them, to avoid a stale group state; and a group with no leader serves nothing. Such a
// replica leads with an error in its log ("leading with a group state marked stale").
//
// A total order for distinct broker ids: the first replica of the group always campaigns.
// Pure; thread-safe.
#pragma once

#include <cstdint>

namespace tokimq::broker {

struct CampaignRank {
  int64_t commitlog_end = 0;  // the replica's CommitLog end, bytes
  bool group_state_stale = false;
  int32_t broker_id = 0;
};

inline bool CampaignsBefore(const CampaignRank& a, const CampaignRank& b) {
  if (a.commitlog_end != b.commitlog_end) return a.commitlog_end > b.commitlog_end;
  if (a.group_state_stale != b.group_state_stale) return !a.group_state_stale;
  return a.broker_id < b.broker_id;
}

}  // namespace tokimq::broker
