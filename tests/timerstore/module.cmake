tokimq_test_module(timerstore DEPS tokimq::timerstore)
if(TARGET timerstore_test)
  # Unit tests of private pieces (delivered_copy.h).
  target_include_directories(timerstore_test PRIVATE ${CMAKE_SOURCE_DIR}/timerstore/src)
endif()
