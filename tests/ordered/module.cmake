# OrderedConsumer through the real broker (client/ordering/ordered_consumer.h): the seed's
# worked example, random plans with failure injection against the ordering promises, a slow key
# that holds no other, lease renewal. Uses tests/integration/broker_process.h.
tokimq_test_module(ordered DEPS tokimq::ordered_consumer)
if(TARGET ordered_test)
  target_include_directories(ordered_test PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/integration)
  target_compile_definitions(ordered_test PRIVATE
    TOKIMQ_BROKER_BIN="$<TARGET_FILE:tokimq_broker_main>")
  add_dependencies(ordered_test tokimq_broker_main)
endif()
