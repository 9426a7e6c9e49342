tokimq_test_module(replication DEPS tokimq::replication)
