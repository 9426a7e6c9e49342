# Integration tests: start the real tokimq-broker binary on a free port and a temp dir.
tokimq_test_module(integration DEPS tokimq::client)
if(TARGET integration_test)
  target_compile_definitions(integration_test PRIVATE
    TOKIMQ_BROKER_BIN="$<TARGET_FILE:tokimq_broker_main>")
  add_dependencies(integration_test tokimq_broker_main)
endif()
