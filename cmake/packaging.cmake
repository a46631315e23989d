# `cmake --install`: the public headers, libgemlet.so and libgemlet.a, the CMake package (gemlet::gemlet,
# gemlet::gemlet_static) and gemlet.pc for pkg-config; the CLI goes to bin (apps/gemlet).
include(CMakePackageConfigHelpers)

set(GEMLET_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gemlet)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/gemlet DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp"
        PATTERN "tools.hpp" EXCLUDE     # the CLI's tools API: not in libgemlet
        PATTERN "history.hpp" EXCLUDE   # the history store: gemlet_history, not in libgemlet (not installed yet)
        PATTERN "server.hpp" EXCLUDE    # gemlet serve: gemlet_server, not in libgemlet
        PATTERN "fetch.hpp" EXCLUDE)    # the store's libcurl fetcher: gemlet_fetch, not in libgemlet
install(TARGETS gemlet_shared gemlet_static EXPORT gemletTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT gemletTargets NAMESPACE gemlet:: DESTINATION ${GEMLET_CMAKE_DIR})

if(TARGET gemlet_store)
  set(GEMLET_WITH_STORE ON)
  set(GEMLET_PC_CRYPTO " libcrypto")
else()
  set(GEMLET_WITH_STORE OFF)
  set(GEMLET_PC_CRYPTO "")
endif()
# With media (image and audio decoding), libgemlet.a needs Debian's decoders: their pkg-config names,
# the same in gemletConfig.cmake (as the imported targets the export names) and gemlet.pc.
if(TARGET gemlet_media)
  set(GEMLET_WITH_MEDIA ON)
  set(GEMLET_PC_MEDIA " libpng16 libjpeg libwebp libheif sndfile vorbisfile libmpg123 soxr")
else()
  set(GEMLET_WITH_MEDIA OFF)
  set(GEMLET_PC_MEDIA "")
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/gemletConfig.cmake.in
  ${CMAKE_BINARY_DIR}/gemletConfig.cmake INSTALL_DESTINATION ${GEMLET_CMAKE_DIR})
# 0.x: a minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/gemletConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/gemletConfig.cmake ${CMAKE_BINARY_DIR}/gemletConfigVersion.cmake
        DESTINATION ${GEMLET_CMAKE_DIR})

# gemlet.pc is written when it is installed: `cmake --install --prefix P` chooses the prefix then.
install(CODE "
  get_filename_component(GEMLET_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\" ABSOLUTE)
  set(GEMLET_PC_LIBDIR ${CMAKE_INSTALL_LIBDIR})
  set(GEMLET_PC_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
  set(GEMLET_PC_VERSION ${PROJECT_VERSION})
  set(GEMLET_PC_CRYPTO \"${GEMLET_PC_CRYPTO}\")
  set(GEMLET_PC_MEDIA \"${GEMLET_PC_MEDIA}\")
  configure_file(${CMAKE_CURRENT_LIST_DIR}/gemlet.pc.in ${CMAKE_BINARY_DIR}/gemlet.pc @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/gemlet.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
