# Integration tests: start the real tokimq-broker binary on a free port and a temp dir; the CLI
# tests also run the real tokimq binary.
tokimq_test_module(integration DEPS tokimq::client)
if(TARGET integration_test)
  target_compile_definitions(integration_test PRIVATE
    TOKIMQ_BROKER_BIN="$<TARGET_FILE:tokimq_broker_main>"
    TOKIMQ_CLI_BIN="$<TARGET_FILE:tokimq_cli>")
  add_dependencies(integration_test tokimq_broker_main tokimq_cli)
endif()
