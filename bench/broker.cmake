# Send path pieces of issue 21 item 1 (round 3). send_properties.cc is compiled in rather than
# linking the whole broker library: the bench needs only it, the timer store and the protocol.
tokimq_bench(send_properties_bench DEPS tokimq::timerstore tokimq::proto)
target_sources(send_properties_bench PRIVATE ${CMAKE_SOURCE_DIR}/broker/src/send_properties.cc)
# Measures private pieces (send_properties.h, schedule_rewrite.h).
target_include_directories(send_properties_bench PRIVATE ${CMAKE_SOURCE_DIR}/broker/src
                                                         ${CMAKE_SOURCE_DIR}/timerstore/src)
find_package(Boost 1.74 REQUIRED)
tokimq_bench(hand_off_bench DEPS tokimq::commitlog Boost::boost Threads::Threads)
