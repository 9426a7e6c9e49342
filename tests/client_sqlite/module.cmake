# Unit tests of client/sqlite (SqliteConnection, SqliteProcessOnce) on temp-dir database files:
# duplicates, aborts, a kill -9 between COMMIT and ACK (fork), two connections and the busy timeout.
if(TARGET tokimq::client_sqlite)
  tokimq_test_module(client_sqlite DEPS tokimq::client_sqlite)
endif()
