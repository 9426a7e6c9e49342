tokimq_test_module(consumer DEPS tokimq::broker)
if(TARGET consumer_test)
  # Unit tests of the private group-state codecs.
  target_include_directories(consumer_test PRIVATE ${CMAKE_SOURCE_DIR}/broker/src)
endif()
