# client/sqlite: SqliteConnection and SqliteProcessOnce (a consumer's process-once on SQLite,
# issue 16). A library of its own so that tokimq::client does not link SQLite.
# Included by client/CMakeLists.txt; Debian libsqlite3-dev (scripts/install-deps.sh).
find_package(SQLite3 REQUIRED)
file(GLOB tokimq_client_sqlite_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/src/sqlite/*.cc)
add_library(tokimq_client_sqlite STATIC ${tokimq_client_sqlite_srcs})
add_library(tokimq::client_sqlite ALIAS tokimq_client_sqlite)
target_include_directories(tokimq_client_sqlite PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include
                                                PRIVATE ${CMAKE_CURRENT_LIST_DIR}/src)
target_link_libraries(tokimq_client_sqlite PUBLIC tokimq::common absl::status absl::statusor
                                                  absl::strings SQLite::SQLite3)
tokimq_warnings(tokimq_client_sqlite)
