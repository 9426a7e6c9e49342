tokimq_test_module(broker DEPS tokimq::broker)
if(TARGET broker_test)
  # RetentionTask is private to the broker library (broker/src/retention_task.h).
  target_include_directories(broker_test PRIVATE ${PROJECT_SOURCE_DIR}/broker/src)
endif()
