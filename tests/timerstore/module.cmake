tokimq_test_module(timerstore DEPS tokimq::timerstore)
