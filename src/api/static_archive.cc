// libgemlet.a's one source of its own (src/api/CMakeLists.txt): its code is the objects of
// gemlet_api and of the libraries below it. A C++ source is what makes CMake's export say that an
// app linking the archive needs the C++ runtime.
namespace gemlet::internal {
[[maybe_unused]] static constexpr int kStaticArchive = 1;
}  // namespace gemlet::internal
