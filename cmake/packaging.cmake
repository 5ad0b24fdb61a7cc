# The Debian package: `cmake --build --preset release --target package`
# writes build/release/floodgate_<version>_<arch>.deb. It holds the server
# alone (the "server" component: /usr/bin/floodgate) and its system files
# from deploy/debian/ (the "deb" component): the systemd unit, the config
# and the environment file for secrets (both conffiles), and the maintainer
# scripts that make the floodgate system user and /var/lib/floodgate. The
# library, headers and CMake package ("dev") stay out.
#
# The "deb" files install to absolute paths (/etc, /lib/systemd), so they
# are EXCLUDE_FROM_ALL: a plain `cmake --install build --prefix ...` (as in
# scripts/check-package.sh) never writes to the machine's /etc.
set(FLOODGATE_DEB_DIR ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian)
install(FILES ${FLOODGATE_DEB_DIR}/floodgate.service
  DESTINATION /lib/systemd/system COMPONENT deb EXCLUDE_FROM_ALL)
# The template unit for restarts that fail no request (floodgate@blue,
# floodgate@green: docs/operations.md, "Graceful restart"), and the sysctl
# those restarts need.
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/deploy/systemd/floodgate@.service
  DESTINATION /lib/systemd/system COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${FLOODGATE_DEB_DIR}/sysctl.conf RENAME 60-floodgate.conf
  DESTINATION /usr/lib/sysctl.d COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${FLOODGATE_DEB_DIR}/floodgate.yaml
  DESTINATION /etc/floodgate COMPONENT deb EXCLUDE_FROM_ALL)
# Secrets go here: root's alone (systemd reads it before dropping to the user).
install(FILES ${FLOODGATE_DEB_DIR}/default RENAME floodgate
  DESTINATION /etc/default PERMISSIONS OWNER_READ OWNER_WRITE
  COMPONENT deb EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME floodgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "floodgate maintainers")
set(CPACK_PACKAGE_CONTACT "floodgate maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "rate limiting, quotas and abuse control service")
# The summary above is the first line; CPack indents the rest.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "floodgate decides whether a request may go ahead: rate limits (fixed and
sliding windows, token bucket, GCRA), quotas, concurrency leases, expiring
sets and one-time passwords, on an embedded store or on Redis. It serves
the Redis protocol, HTTP/JSON and Envoy's rate limit service (gRPC).

This package runs it as a systemd service under the floodgate system user.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "floodgate maintainers")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The libraries' packages come from dpkg-shlibdeps (dpkg-dev); adduser is
# for the maintainer scripts.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS adduser)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${FLOODGATE_DEB_DIR}/conffiles ${FLOODGATE_DEB_DIR}/postinst
  ${FLOODGATE_DEB_DIR}/prerm ${FLOODGATE_DEB_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# One package from the two components.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server deb)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
include(CPack)
