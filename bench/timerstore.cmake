tokimq_bench(timerstore_bench DEPS tokimq::timerstore)
