# Install rules and package files (included from CMakeLists.txt when HALFGRAD_INSTALL is on;
# docs/library.md shows the three ways a project uses them):
# - the two static libraries and the headers, under <prefix>/include/halfgrad/<layer>/;
# - a CMake package: halfgradConfig.cmake with the components `numerics` and `halfgrad`, each an
#   exported target file (halfgrad::numerics, halfgrad::halfgrad), and halfgradConfigVersion.cmake
#   (SameMajorVersion: while the major version is 0 every 0.x release matches, CHANGELOG.md);
# - halfgrad.pc and halfgrad-numerics.pc for pkg-config;
# - CPack: the Debian packages libhalfgrad-dev (install component `dev`) and halfgrad (`programs`).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(HALFGRAD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/halfgrad)

install(TARGETS halfgrad_numerics EXPORT halfgradNumericsTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(TARGETS halfgrad EXPORT halfgradTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
foreach(layer IN LISTS HALFGRAD_NUMERICS_LAYERS HALFGRAD_ENGINE_LAYERS)
  install(DIRECTORY ${HALFGRAD_LAYER_ROOT}/${layer} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/halfgrad
    COMPONENT dev FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/halfgrad/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/halfgrad COMPONENT dev)

# One target file per component, so that find_package(halfgrad COMPONENTS numerics) needs
# neither nlohmann_json nor MPI.
install(EXPORT halfgradNumericsTargets NAMESPACE halfgrad:: FILE halfgrad-numerics-targets.cmake
  DESTINATION ${HALFGRAD_CMAKE_DIR} COMPONENT dev)
install(EXPORT halfgradTargets NAMESPACE halfgrad:: FILE halfgrad-halfgrad-targets.cmake
  DESTINATION ${HALFGRAD_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/halfgradConfig.cmake.in ${PROJECT_BINARY_DIR}/halfgradConfig.cmake
  INSTALL_DESTINATION ${HALFGRAD_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/halfgradConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/halfgradConfig.cmake ${PROJECT_BINARY_DIR}/halfgradConfigVersion.cmake
  DESTINATION ${HALFGRAD_CMAKE_DIR} COMPONENT dev)

# pkg-config: the prefix is found from the .pc file's own place (${pcfiledir}), so the files stay
# right for `cmake --install build --prefix P` and for the Debian package alike.
file(RELATIVE_PATH HALFGRAD_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" HALFGRAD_PC_TO_PREFIX "${HALFGRAD_PC_TO_PREFIX}")  # ../.., not ../../
set(HALFGRAD_PC_REQUIRES "libhwy nlohmann_json libcrypto sentencepiece")  # the static engine links the last two privately
if(HALFGRAD_MPI)
  string(APPEND HALFGRAD_PC_REQUIRES " mpi-c")  # the MPI communicator uses MPI's C API
endif()
foreach(pc halfgrad halfgrad-numerics)
  configure_file(cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endforeach()

# The `halfgrad` command (the other demos are teaching programs run from the build tree).
if(HALFGRAD_BUILD_PROGRAMS)
  install(TARGETS halfgrad_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT programs)
endif()

# CPack: two Debian packages from the install components (docs/library.md: `cpack` in the build
# tree, then `apt install ./libhalfgrad-dev_*.deb`). libhalfgrad-dev (component dev) depends on
# the headers its headers include and the libraries its libraries need at link time; halfgrad
# (component programs) on the shared libraries its binary links, found by dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME halfgrad)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "halfgrad maintainers <halfgrad@invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev)
if(HALFGRAD_BUILD_PROGRAMS)
  list(APPEND CPACK_COMPONENTS_ALL programs)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>_<arch>.deb
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libhalfgrad-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhwy-dev, nlohmann-json3-dev, libssl-dev, libsentencepiece-dev, libgomp1")
if(HALFGRAD_MPI)
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", libopenmpi-dev")
endif()
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_NAME halfgrad)
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_SHLIBDEPS ON)
include(CPack)
