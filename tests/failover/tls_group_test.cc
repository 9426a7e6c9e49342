// A broker group whose members accept only TLS (--tls-mode enforcing; docs/replication.md "TLS
// between members"): three replicas in sync mode copy over TLS, and after the leader's kill -9
// the candidates rank each other over TLS too (GroupElection::AskPeer, docs/cluster.md
// "Election" step 4). The new leader's campaign line must name its live peer's CommitLog end:
// a plaintext peer query is closed by an enforcing peer, which reads as "down" (the candidate
// then campaigns without deferring to a longer log) or as no answer (no one campaigns).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "client/admin.h"
#include "failover/broker_groups.h"
#include "integration/test_certificates.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;

// The last line of `path` that holds `needle` ("" when none).
std::string LastLineWith(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string last;
  for (std::string l; std::getline(in, l);) {
    if (l.find(needle) != std::string::npos) last = l;
  }
  return last;
}

class TlsGroupTest : public testing::BrokerGroupsTest {};

TEST_F(TlsGroupTest, EnforcingReplicasCopyAndRankEachOtherOverTls) {
  ASSERT_TRUE(testing::MakeCertificates(dir_.path()));
  const std::string ca = dir_.Join("ca.pem");
  const int g = AddGroup(
      "g1", 3, "sync", 2,
      [&](int, std::vector<std::string>* args) {
        args->insert(args->end(), {"--tls-cert", dir_.Join("server.pem"), "--tls-key",
                                   dir_.Join("server.key"), "--tls-mode", "enforcing",
                                   "--replication-tls-ca", ca});
      },
      [&](int, testing::BrokerProcess* b) { b->set_client_tls(ca); });
  ASSERT_FALSE(HasFailure());
  int64_t term = 0;
  const int leader = Leader(g, &term);
  ASSERT_GE(leader, 0);
  ASSERT_NO_FATAL_FAILURE(CreateDelayTopic("orders", 2, {g}));
  // Sync sends: each answered only once a follower copied it, over TLS.
  ASSERT_NO_FATAL_FAILURE(SendDelayed(leader, "orders", 20, "order-"));
  ASSERT_TRUE(CaughtUp(g));

  brokers_[leader]->Kill();
  int64_t new_term = 0;
  const int next = WaitLeader(g, term, &new_term);
  if (next < 0) DumpLogs();
  ASSERT_GE(next, 0) << "no replica campaigned after the leader's kill";
  int other = -1;  // the surviving follower
  for (int i : groups_[g].members) {
    if (i != leader && i != next) other = i;
  }
  ASSERT_GE(other, 0);
  const int other_id = other - groups_[g].members.front();
  const std::string line =
      LastLineWith(brokers_[next]->log_path(), "campaigning with CommitLog end");
  EXPECT_NE(line.find("id " + std::to_string(other_id) + ": end "), std::string::npos)
      << "the candidate did not read its live peer (id " << other_id << ") over TLS: " << line;
  // The survivor follows the new leader over TLS and holds its end.
  EXPECT_TRUE(testing::AwaitTrue(
      [&] {
        auto l = client::AdminClient(Quick(next)).GroupStatus();
        auto f = client::AdminClient(Quick(other)).GroupStatus();
        return l.ok() && f.ok() && f->role() == "follower" && f->term() == new_term &&
               f->max_offset() == l->max_offset() && f->pull_error().empty();
      },
      30s, "the surviving follower following the new leader"));
}

}  // namespace
}  // namespace tokimq
