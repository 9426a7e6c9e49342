# tests/package: what an operator installs and runs. package_test.sh builds the .deb from this
# build dir with CPack and checks its contents, maintainer scripts and systemd unit;
# broker_flags_test.sh checks --version of both binaries and the broker's --log-format json.
if(TARGET tokimq_broker_main AND TARGET tokimq_cli)
  add_test(NAME package.deb_contents
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/package_test.sh ${CMAKE_BINARY_DIR}
                   ${PROJECT_VERSION})
  set_tests_properties(package.deb_contents PROPERTIES TIMEOUT 300 LABELS package)
  add_test(NAME package.broker_flags
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/broker_flags_test.sh
                   $<TARGET_FILE:tokimq_broker_main> $<TARGET_FILE:tokimq_cli> ${PROJECT_VERSION})
  set_tests_properties(package.broker_flags PROPERTIES TIMEOUT 120 LABELS package)
  add_dependencies(tokimq_tests tokimq_broker_main tokimq_cli)
endif()
