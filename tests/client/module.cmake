# Unit tests of the C++ client library (client/): the Connection against an in-process fake
# broker on a loopback socket.
tokimq_test_module(client DEPS tokimq::client)
if(TARGET client_test)
  # SplitHostPort / DialTcp are private to the client library (client/src/dial.h).
  target_include_directories(client_test PRIVATE ${PROJECT_SOURCE_DIR}/client/src)
endif()
