# The web console's JSON handlers through http::Router::Dispatch on an in-process broker
# (console_test), and the page in headless Chromium against a real broker (run.sh).
tokimq_test_module(console DEPS tokimq::broker)
if(TARGET console_test)
  target_include_directories(console_test PRIVATE ${PROJECT_SOURCE_DIR}/broker/src)
endif()
# The page in headless Chromium (tests/console/run.sh): needs node/npm (puppeteer-core is
# installed into the build dir) and Debian's chromium (never downloaded).
find_program(TOKIMQ_NODE node)
find_program(TOKIMQ_NPM npm)
find_program(TOKIMQ_CHROMIUM chromium)
if(TOKIMQ_NODE AND TOKIMQ_NPM AND TOKIMQ_CHROMIUM)
  add_test(NAME console.browser COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console/run.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(console.browser PROPERTIES TIMEOUT 240 LABELS integration
                       ENVIRONMENT "TOKIMQ_CHROMIUM=${TOKIMQ_CHROMIUM}")
  add_dependencies(tokimq_tests tokimq_broker_main tokimq_cli)
else()
  message(STATUS "tokimq: console browser test not registered (node, npm or chromium not found)")
endif()
