#!/usr/bin/env bash
# Long fault runs of broker groups (issue 20 item 7; docs/operations.md "Failover"): etcd and
# groups of replicas in sync mode on loopback (or network namespaces), driven by the tests in
# tests/failover/ with their history checker (every send ack, receipt and ack; lost / early /
# duplicates):
#   1. kill -9 of the leader under a delayed-message load, KILLS times (default 20): each kill
#      must elect a new leader; prints the election and "sends acknowledged again" times per
#      kill and their p50 / max, and the checker's report (0 lost, 0 early asserted);
#   2. leader pause (SIGSTOP past its lease, then SIGCONT), PAUSES times (default 5): the old
#      leader must acknowledge no write after its successor is elected and must follow it;
#   3. leader isolated from its followers and etcd by network namespaces (its veth down, then
#      up), PARTITIONS times in one run (default 10; partition_test.cc): no send started after
#      the cut acknowledged by the old leader, a newer term elected, after the heal the old
#      leader follows and is level; needs root (skipped otherwise);
#   4. two broker groups (2 and 3 replicas): kill -9 of a follower of each and their restart
#      with their data, then an etcd kill and restart, all under load; GROUPS runs (default 3);
#   5. disk full on a follower (tmpfs; needs root), DISKFULL runs (default 3).
# Every run ends with the checker: 0 acknowledged lost, 0 early, 0 phantom asserted.
#
# Usage: scripts/jepsen.sh [--kills N] [--pauses N] [--partitions N] [--groups N]
#                          [--disk-full N] [--build-dir DIR]   (default build/asan)
# N = 0 skips that part. Needs etcd (Debian etcd-server: scripts/install-deps.sh) and iproute2.
# Exit status: the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/etcd.sh

kills=20
pauses=5
partitions=10
groups=3
disk_full=3
build_dir=build/asan
while (($#)); do
  case "$1" in
    --kills) kills="$2"; shift ;;
    --pauses) pauses="$2"; shift ;;
    --partitions) partitions="$2"; shift ;;
    --groups) groups="$2"; shift ;;
    --disk-full) disk_full="$2"; shift ;;
    --build-dir) build_dir="$2"; shift ;;
    *) echo "jepsen.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
etcd_require jepsen.sh  # the test binary starts etcd itself (tests/cluster/etcd_process.h)

test_bin="$PWD/$build_dir/tests/failover_test"
if [[ ! -x "$test_bin" ]]; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
  preset="$(basename "$build_dir")"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j2 --target failover_test
fi

status=0
if ((kills > 0)); then
  echo "== kill -9 of the leader, $kills times =="
  TOKIMQ_FAILOVER_KILLS="$kills" "$test_bin" \
    --gtest_filter='FailoverTest.KillNineOfTheLeaderUnderDelayedLoadLosesNothingAcknowledged' ||
    status=$?
fi
if ((pauses > 0)); then
  echo "== leader paused past its lease, $pauses times =="
  "$test_bin" --gtest_filter='FailoverTest.PausedLeaderThatComesBackAcknowledgesNothingAndFollows' \
    --gtest_repeat="$pauses" || status=$?
fi
if ((partitions > 0)); then
  echo "== leader isolated by network namespaces, $partitions times =="
  TOKIMQ_PARTITIONS="$partitions" "$test_bin" --gtest_filter='PartitionTest.*' || status=$?
fi
if ((groups > 0)); then
  echo "== two broker groups: follower kills, etcd restart, $groups runs =="
  "$test_bin" --gtest_filter='TwoGroupsTest.*' --gtest_repeat="$groups" || status=$?
fi
if ((disk_full > 0)); then
  echo "== disk full on a follower, $disk_full runs =="
  "$test_bin" --gtest_filter='DiskFullFollowerTest.*' --gtest_repeat="$disk_full" || status=$?
fi
exit "$status"
