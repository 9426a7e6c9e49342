tokimq_test_module(broker DEPS tokimq::broker)
