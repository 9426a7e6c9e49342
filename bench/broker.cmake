tokimq_bench(send_properties_bench DEPS tokimq::broker)
# Measures private pieces (send_properties.h, schedule_rewrite.h).
target_include_directories(send_properties_bench PRIVATE ${CMAKE_SOURCE_DIR}/broker/src
                                                         ${CMAKE_SOURCE_DIR}/timerstore/src)
