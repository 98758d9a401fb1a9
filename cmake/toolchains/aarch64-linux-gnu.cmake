# Cross build for aarch64 Linux with Debian's cross compilers
# (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu):
#   cmake -S . -B build-arm64 \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DFAULTLINE_TESTS=OFF
#   cmake --build build-arm64 --target faultline
# The library needs only the target's libc. The offline targets (the CLI,
# the symbolizer) are built only where their arm64 packages are found
# (dpkg --add-architecture arm64); see doc/aarch64.md.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(FAULTLINE_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${FAULTLINE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FAULTLINE_CROSS_TRIPLE}-g++)

# Libraries and headers only from the target's tree; programs from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${FAULTLINE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config answers for the target's packages only (none installed: the
# offline targets are skipped), never the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${FAULTLINE_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# Run the target's programs (try_run, test programs) through qemu when it
# is installed; binfmt_misc (tools/setup-qemu-aarch64) makes this unneeded.
find_program(FAULTLINE_QEMU_AARCH64 qemu-aarch64-static)
if(FAULTLINE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FAULTLINE_QEMU_AARCH64};-L;/usr/${FAULTLINE_CROSS_TRIPLE})
endif()
