# Unit tests of the C++ client library (client/): the Connection against an in-process fake
# broker on a loopback socket.
tokimq_test_module(client DEPS tokimq::client)
