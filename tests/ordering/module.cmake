tokimq_test_module(ordering DEPS tokimq::client_ordering)
