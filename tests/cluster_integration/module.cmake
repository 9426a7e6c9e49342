# Cluster integration tests: a real etcd and three real tokimq-broker processes on loopback
# (tests/support/cluster_processes.h); the routing C++ clients, the CLI and the official
# RocketMQ Node.js client (nodejs_cluster_test.cc, skipped without node or the endpoint)
# against them.
tokimq_test_module(cluster_integration DEPS tokimq::client tokimq::cluster)
if(TARGET cluster_integration_test)
  find_program(TOKIMQ_NODE node)
  get_property(tokimq_cluster_have_rmq GLOBAL PROPERTY TOKIMQ_HAVE_ROCKETMQ)
  get_property(tokimq_cluster_npm_dir GLOBAL PROPERTY TOKIMQ_ROCKETMQ_NPM_DIR)
  if(tokimq_cluster_have_rmq)
    set(tokimq_cluster_have_rmq 1)
  else()
    set(tokimq_cluster_have_rmq 0)
  endif()
  target_compile_definitions(cluster_integration_test PRIVATE
    TOKIMQ_BROKER_BIN="$<TARGET_FILE:tokimq_broker_main>"
    TOKIMQ_CLI_BIN="$<TARGET_FILE:tokimq_cli>"
    TOKIMQ_NODE_BIN="${TOKIMQ_NODE}"
    TOKIMQ_HAVE_ROCKETMQ=${tokimq_cluster_have_rmq}
    TOKIMQ_ROCKETMQ_NPM_DIR="${tokimq_cluster_npm_dir}"
    TOKIMQ_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_dependencies(cluster_integration_test tokimq_broker_main tokimq_cli)
endif()
