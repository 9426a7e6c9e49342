tokimq_test_module(commitlog DEPS tokimq::commitlog)
