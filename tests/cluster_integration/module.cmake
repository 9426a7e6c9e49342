# Cluster integration tests: a real etcd (tests/cluster/etcd_process.h) and three real
# tokimq-broker processes on loopback; the routing C++ clients and the CLI against them.
tokimq_test_module(cluster_integration DEPS tokimq::client tokimq::cluster)
if(TARGET cluster_integration_test)
  target_compile_definitions(cluster_integration_test PRIVATE
    TOKIMQ_BROKER_BIN="$<TARGET_FILE:tokimq_broker_main>"
    TOKIMQ_CLI_BIN="$<TARGET_FILE:tokimq_cli>")
  add_dependencies(cluster_integration_test tokimq_broker_main tokimq_cli)
endif()
