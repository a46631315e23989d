# Cross-compiling for 64-bit ARM (the NEON kernels) with Debian's g++-aarch64-linux-gnu and the
# arm64 multiarch libraries (libhwy-dev:arm64, libgtest-dev:arm64); tests run under qemu-aarch64.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DGEMLET_BUILD_APPS=OFF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Run test binaries (gtest discovery, ctest) through the emulator. It finds the arm64 loader and libc
# of libc6:arm64 in /lib (multiarch); "-L /usr/aarch64-linux-gnu" would mix the cross toolchain's
# older loader with the multiarch libc, and threads then hang.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
# Multiarch: arm64 libraries live in /usr/lib/aarch64-linux-gnu; header-only packages (nlohmann-json,
# CLI11) are shared with the host.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
