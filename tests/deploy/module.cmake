# tests/deploy: the Prometheus scrape config, alert rules (with promtool's rule unit tests) and
# the Grafana dashboard of deploy/ (issue 18 item 7). `ctest -L deploy`.
add_test(NAME deploy.prometheus_grafana
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/deploy_check.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(deploy.prometheus_grafana PROPERTIES TIMEOUT 120 LABELS deploy)
