# Crash loop: tokimq-crashloop kills the real broker with SIGKILL under a
# delayed + lease workload and checks the history. ctest runs the short (~60 s) version; find it
# with `ctest -L crash`. The long version: tests/crash/crash_loop.sh --long.
if(TARGET tokimq_crashloop AND TARGET tokimq_broker_main)
  add_test(NAME crash_loop_short
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/crash/crash_loop.sh --short
                   $<TARGET_FILE:tokimq_crashloop> $<TARGET_FILE:tokimq_broker_main>)
  set_tests_properties(crash_loop_short PROPERTIES LABELS "crash" TIMEOUT 300)
  add_dependencies(tokimq_tests tokimq_crashloop tokimq_broker_main)
endif()
