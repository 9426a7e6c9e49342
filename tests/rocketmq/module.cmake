# The RocketMQ gRPC endpoint is checked end to end with the official Node.js client
# (tests/rocketmq/run.sh). Registered only when the endpoint was generated and node/npm exist.
get_property(tokimq_have_rocketmq GLOBAL PROPERTY TOKIMQ_HAVE_ROCKETMQ)
find_program(TOKIMQ_NODE node)
find_program(TOKIMQ_NPM npm)
if(tokimq_have_rocketmq)
  # Unit tests of the endpoint's pure parts (private headers of rocketmq/src).
  tokimq_test_module(rocketmq DEPS tokimq::rocketmq)
  target_include_directories(rocketmq_test PRIVATE ${CMAKE_SOURCE_DIR}/rocketmq/src)
endif()
if(tokimq_have_rocketmq AND TOKIMQ_NODE AND TOKIMQ_NPM)
  add_test(NAME rocketmq.official_nodejs_client
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/rocketmq/run.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(rocketmq.official_nodejs_client PROPERTIES TIMEOUT 240 LABELS integration)
  # The same client against a broker with --auth (issue 17): credentials right/wrong/missing.
  add_test(NAME rocketmq.official_nodejs_client_auth
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/rocketmq/run.sh ${CMAKE_BINARY_DIR} rocketmq_auth.test.js)
  set_tests_properties(rocketmq.official_nodejs_client_auth PROPERTIES TIMEOUT 120 LABELS integration)
  # Compatibility round 2 (issue 22): transaction ids, __SHARDINGKEY, error texts, group
  # delivery order, namespaces, auto-renew.
  add_test(NAME rocketmq.official_nodejs_client_compat
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/rocketmq/run.sh ${CMAKE_BINARY_DIR} rocketmq_compat.test.js)
  set_tests_properties(rocketmq.official_nodejs_client_compat PROPERTIES TIMEOUT 180 LABELS integration)
  # SQL92 filters and offset-based consumption (issue 22 items 5 and 8).
  add_test(NAME rocketmq.official_nodejs_client_filter
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/rocketmq/run.sh ${CMAKE_BINARY_DIR} rocketmq_filter.test.js)
  set_tests_properties(rocketmq.official_nodejs_client_filter PROPERTIES TIMEOUT 120 LABELS integration)
  # Namespaces (issue 22 item 6): two namespaces, same names, nothing crosses.
  add_test(NAME rocketmq.official_nodejs_client_namespace
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/rocketmq/run.sh ${CMAKE_BINARY_DIR} rocketmq_namespace.test.js)
  set_tests_properties(rocketmq.official_nodejs_client_namespace PROPERTIES TIMEOUT 120 LABELS integration)
  add_dependencies(tokimq_tests tokimq_broker_main tokimq_cli)
elseif(NOT tokimq_have_rocketmq)
  message(STATUS "tokimq: RocketMQ Node.js test not registered (endpoint not built)")
else()
  message(STATUS "tokimq: RocketMQ Node.js test not registered (node/npm not found)")
endif()
