tokimq_test_module(transaction DEPS tokimq::broker)
if(TARGET transaction_test)
  # TransactionService is private to the broker library (broker/src/transaction/).
  target_include_directories(transaction_test PRIVATE ${PROJECT_SOURCE_DIR}/broker/src)
endif()
