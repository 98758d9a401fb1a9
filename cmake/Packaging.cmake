# A Debian package of what `cmake --install` installs: the library, its
# headers, the CMake and pkg-config files, the faultline command, its man page,
# the report schema, and the Python package with its start-up hook for
# Debian's python3 (lib/python3/dist-packages: faultline, _faultline_boot.py,
# faultline-boot.pth), so that a preloaded Python job records torch.compile
# history and leaves the crash text to faulthandler under -X faulthandler
# without a pip install. `cpack -G DEB` in the build tree (or
# `cmake --build build --target package`) writes faultline_<version>_amd64.deb.
option(FAULTLINE_INSTALL_PYTHON "install the Python package into lib/python3/dist-packages" ON)
if(FAULTLINE_INSTALL_PYTHON)
  set(FAULTLINE_PYTHON_DIR lib/python3/dist-packages)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/faultline DESTINATION ${FAULTLINE_PYTHON_DIR}
          FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
  install(FILES ${PROJECT_SOURCE_DIR}/python/_faultline_boot.py
                ${PROJECT_SOURCE_DIR}/python/faultline-boot.pth
          DESTINATION ${FAULTLINE_PYTHON_DIR})
endif()

set(CPACK_PACKAGE_NAME faultline)
set(CPACK_PACKAGE_VENDOR "faultline")
set(CPACK_PACKAGE_CONTACT "faultline maintainers <faultline@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "crash reporter for Linux x86-64 processes")
set(CPACK_PACKAGE_DESCRIPTION
    "libfaultline.so, preloaded or linked, writes one JSON report of every thread (native and Python frames) when a process dies of a fatal signal or an uncaught C++ exception; the faultline command renders, symbolizes and triages the reports.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
# Dependencies (libdw1, libstdc++6, ...) from the binaries' NEEDED entries,
# as Debian's own packages do. The library itself needs libc only: it loads
# libunwind when FAULTLINE_UNWINDER chooses it, so libunwind8 is only
# recommended (`faultline dump` unwinds with faultline's own unwinder).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libunwind8")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# The library lands in /usr/lib: run ldconfig after install and removal.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/deb/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
