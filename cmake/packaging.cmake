# Installation (`cmake --install <build dir> [--prefix P]`) and the Debian package
# (`cpack -G DEB` in a build dir, or scripts/package.sh for a release .deb). docs/operations.md
# "Installing from a package".
#
# Layout under the prefix (the .deb uses /usr):
#   bin/tokimq-broker, bin/tokimq                   the broker and the CLI
#   lib/systemd/system/tokimq-broker.service        the unit (ExecStart points into the prefix)
#   share/tokimq/tokimq.toml                         commented example config
#   share/doc/tokimq/*.md, share/doc/tokimq/formats  the docs
# The unit reads /etc/tokimq/tokimq.toml; the package's postinst creates it from the example.
include(GNUInstallDirs)

install(TARGETS tokimq_broker_main tokimq_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/deploy/tokimq.toml DESTINATION ${CMAKE_INSTALL_DATADIR}/tokimq)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Prometheus scrape config + alert rules and the Grafana dashboard (docs/metrics.md).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/prometheus ${PROJECT_SOURCE_DIR}/deploy/grafana
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tokimq)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md")

# The unit names the binaries by absolute path, so it is written at install time, when the
# prefix is known (`--prefix`, or CPack's packaging prefix), not at configure time.
set(TOKIMQ_UNIT_TEMPLATE ${PROJECT_SOURCE_DIR}/deploy/systemd/tokimq-broker.service.in)
set(TOKIMQ_UNIT_OUT ${PROJECT_BINARY_DIR}/deploy/tokimq-broker.service)
install(CODE "
  set(TOKIMQ_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  set(TOKIMQ_DATADIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/tokimq\")
  set(TOKIMQ_DOCDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}\")
  configure_file(\"${TOKIMQ_UNIT_TEMPLATE}\" \"${TOKIMQ_UNIT_OUT}\" @ONLY)
")
install(FILES ${TOKIMQ_UNIT_OUT} DESTINATION lib/systemd/system)

set(CPACK_PACKAGE_NAME tokimq)
set(CPACK_PACKAGE_VENDOR "tokimq")
set(CPACK_PACKAGE_CONTACT "tokimq maintainers <tokimq@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "delay-message broker (RocketMQ 5 timer messages, gRPC API)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)   # runtime libraries from the binaries (dpkg-shlibdeps)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
    ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_GENERATOR DEB)
include(CPack)
