# client/ordering: per-key ordering planner and executor (docs/ordering.md).
# Included by client/CMakeLists.txt; depends on common only (DESIGN.md: client <- common, proto).
file(GLOB_RECURSE tokimq_client_ordering_srcs CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_LIST_DIR}/src/ordering/*.cc)
add_library(tokimq_client_ordering STATIC ${tokimq_client_ordering_srcs})
add_library(tokimq::client_ordering ALIAS tokimq_client_ordering)
target_include_directories(tokimq_client_ordering PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include
                                                  PRIVATE ${CMAKE_CURRENT_LIST_DIR}/src)
target_link_libraries(tokimq_client_ordering PUBLIC tokimq::common absl::flat_hash_map
                                                    absl::status absl::statusor absl::strings
                                                    Threads::Threads)
tokimq_warnings(tokimq_client_ordering)

# OrderedConsumer (client/ordering/ordered_consumer.h): the planner fed by a FIFO topic through
# the SimpleConsumer; a library of its own so client_ordering keeps depending on common only.
if(TARGET tokimq_client)
  file(GLOB tokimq_ordered_consumer_srcs CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_LIST_DIR}/src/ordered/*.cc)
  add_library(tokimq_ordered_consumer STATIC ${tokimq_ordered_consumer_srcs})
  add_library(tokimq::ordered_consumer ALIAS tokimq_ordered_consumer)
  target_link_libraries(tokimq_ordered_consumer PUBLIC tokimq::client tokimq::client_ordering)
  tokimq_warnings(tokimq_ordered_consumer)
endif()
