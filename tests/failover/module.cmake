# Failover tests (issue 20 items 4 and 7): the history checker (failover/history.h) and real
# etcd + tokimq-broker processes under a checked delayed-message load (failover/load.h): leader
# kill and pause (failover_test.cc), leader isolation by network namespaces (partition_test.cc,
# failover/netns.h), two groups with follower kills and an etcd restart
# (broker_groups_test.cc), disk full on a follower (disk_full_follower_test.cc), TLS-enforcing
# replicas (tls_group_test.cc), a follower frozen across an etcd restart (etcd_outage_test.cc).
# scripts/jepsen.sh runs the long versions.
tokimq_test_module(failover DEPS tokimq::client tokimq::cluster fmt::fmt)
if(TARGET failover_test)
  target_compile_definitions(failover_test PRIVATE
    TOKIMQ_BROKER_BIN="$<TARGET_FILE:tokimq_broker_main>"
    TOKIMQ_CLI_BIN="$<TARGET_FILE:tokimq_cli>")
  add_dependencies(failover_test tokimq_broker_main tokimq_cli)
endif()
