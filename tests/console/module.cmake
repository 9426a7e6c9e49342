# The web console's JSON handlers through http::Router::Dispatch on an in-process broker
# (console_test), and the page in headless Chromium against a real broker (run.sh).
tokimq_test_module(console DEPS tokimq::broker)
if(TARGET console_test)
  target_include_directories(console_test PRIVATE ${PROJECT_SOURCE_DIR}/broker/src)
endif()
