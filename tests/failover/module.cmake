# Failover tests (issue 20 items 4 and 7): the history checker (failover/history.h) and a real
# etcd with one broker group of three replicas (tokimq-broker processes) on loopback, whose
# leader is killed with SIGKILL under a delayed-message load. scripts/jepsen.sh runs the long
# version (TOKIMQ_FAILOVER_KILLS).
tokimq_test_module(failover DEPS tokimq::client tokimq::cluster fmt::fmt)
if(TARGET failover_test)
  target_compile_definitions(failover_test PRIVATE
    TOKIMQ_BROKER_BIN="$<TARGET_FILE:tokimq_broker_main>"
    TOKIMQ_CLI_BIN="$<TARGET_FILE:tokimq_cli>")
  add_dependencies(failover_test tokimq_broker_main tokimq_cli)
endif()
