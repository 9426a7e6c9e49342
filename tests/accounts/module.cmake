# tests/accounts: the bank-account example (examples/accounts). Unit tests of its log model and
# SQLite projection (accounts_test), and the short form of scripts/accounts-demo.sh against a
# fresh broker (failures and a kill -9 of the consumer injected; the replay check must pass).
if(TARGET tokimq_accounts_lib)
  tokimq_test_module(accounts DEPS tokimq_accounts_lib)
  if(TARGET tokimq_broker_main AND TARGET tokimq_cli AND TARGET accounts)
    add_test(NAME demo.accounts_short
             COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/accounts-demo.sh --short --bins
                     $<TARGET_FILE:tokimq_broker_main> $<TARGET_FILE:tokimq_cli>
                     $<TARGET_FILE:accounts>)
    set_tests_properties(demo.accounts_short PROPERTIES TIMEOUT 600)
    add_dependencies(tokimq_tests tokimq_broker_main tokimq_cli accounts)
  endif()
endif()
