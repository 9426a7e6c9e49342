tokimq_bench(timerstore_bench DEPS tokimq::timerstore)
tokimq_bench(delivered_copy_bench DEPS tokimq::timerstore)
# Measures private pieces (delivered_copy.h).
target_include_directories(delivered_copy_bench PRIVATE ${CMAKE_SOURCE_DIR}/timerstore/src)
tokimq_bench(retention_churn_bench DEPS tokimq::timerstore)
