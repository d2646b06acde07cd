# Cross-compiling trainit for 64-bit Arm (Ascend hosts) with Debian's cross
# toolchain; the tests run under qemu-user. container/deps.sh --cross
# installs what this file names:
#   g++-aarch64-linux-gnu    the compilers, and the arm64 C library in
#                            /usr/aarch64-linux-gnu (static libc.a included)
#   libfmt-dev:arm64, libsodium-dev:arm64, libgtest-dev:arm64,
#   libsystemd-dev:arm64
#                            Debian multiarch: arm64 libraries and CMake
#                            packages in /usr/lib/aarch64-linux-gnu
#   qemu-user-static         runs the aarch64 test binaries on any host
#
#   cmake --workflow --preset aarch64
#
# No CMAKE_FIND_ROOT_PATH: Debian's multiarch keeps the arm64 libraries apart
# from the host's by directory, and CMake looks in /usr/lib/aarch64-linux-gnu
# (CMAKE_LIBRARY_ARCHITECTURE) and never in the host's /usr/lib/x86_64-linux-gnu;
# headers without an architecture (nlohmann-json, fmt) are shared. Programs
# found at configure time (clang-format, sh) are the host's.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# pkg-config (libsodium) reads only the arm64 .pc files: the host's
# pkg-config, pointed at the multiarch directories (Debian 12 ships no
# aarch64-linux-gnu-pkg-config without dpkg-cross's wrapper).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

# ctest (and gtest_discover_tests at build time) run every aarch64 executable
# through this. The test binaries are static, and the one dynamic helper finds
# Debian's multiarch arm64 loader (/lib/ld-linux-aarch64.so.1): qemu needs no
# sysroot (-L).
set(CMAKE_CROSSCOMPILING_EMULATOR /usr/bin/qemu-aarch64-static)
