# tests/demo: the order-timeout example. Unit tests of its SQLite order store (demo_test),
# and a black-box run of the example against a fresh broker, including a kill -9 of the broker
# mid-run followed by --resume (order_timeout_test.sh, driven by ctest).
if(TARGET tokimq_order_timeout_lib)
  tokimq_test_module(demo DEPS tokimq_order_timeout_lib)
  if(TARGET tokimq_broker_main AND TARGET tokimq_cli AND TARGET order_timeout)
    add_test(NAME demo.order_timeout_end_to_end
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/order_timeout_test.sh
                     $<TARGET_FILE:tokimq_broker_main> $<TARGET_FILE:tokimq_cli>
                     $<TARGET_FILE:order_timeout>)
    set_tests_properties(demo.order_timeout_end_to_end PROPERTIES TIMEOUT 600)
    add_dependencies(tokimq_tests tokimq_broker_main tokimq_cli order_timeout)
  endif()
endif()
