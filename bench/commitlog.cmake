tokimq_bench(commitlog_bench DEPS tokimq::commitlog)
