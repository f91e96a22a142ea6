# The installed C++ package (docs/cpp.md): public headers, the core library
# (static, position-independent: bundles, runtime table, module registry,
# C ABI; links only libdl and pthreads) and a CMake package config
# exporting it as cutecall::core (cutecall::bundle: the same target, the
# name it had first). In a wheel (scikit-build-core) it lives inside
# the Python package, cutecall/{include,lib,lib/cmake/cutecall}, which
# `cutecall --cmakedir` prints; `cmake --install` puts it under the prefix.
include(CMakePackageConfigHelpers)

if(SKBUILD)
  set(CUTECALL_PKG_DIR "cutecall/")
else()
  set(CUTECALL_PKG_DIR "")
endif()
set(CUTECALL_CMAKE_DIR "${CUTECALL_PKG_DIR}lib/cmake/cutecall")
file(STRINGS "${CMAKE_CURRENT_SOURCE_DIR}/pyproject.toml" _version_line
     REGEX "^version = ")
string(REGEX REPLACE "^version = \"([^\"]*)\".*" "\\1" CUTECALL_VERSION
       "${_version_line}")

# What a consumer includes: every header of cpp/include/cutecall, and only
# those (internal headers live beside their sources in cpp/src;
# tests/bundle/test_cpp_package.py checks both).
file(GLOB CUTECALL_PUBLIC_HEADERS CONFIGURE_DEPENDS
     "${CMAKE_CURRENT_SOURCE_DIR}/cpp/include/cutecall/*.h")

set_target_properties(cutecall_core PROPERTIES EXPORT_NAME core)
add_library(cutecall::core ALIAS cutecall_core)
add_library(cutecall::bundle ALIAS cutecall_core)

install(TARGETS cutecall_core EXPORT cutecallTargets
        ARCHIVE DESTINATION "${CUTECALL_PKG_DIR}lib"
        INCLUDES DESTINATION "${CUTECALL_PKG_DIR}include")
install(FILES ${CUTECALL_PUBLIC_HEADERS}
        DESTINATION "${CUTECALL_PKG_DIR}include/cutecall")
install(EXPORT cutecallTargets NAMESPACE cutecall::
        DESTINATION "${CUTECALL_CMAKE_DIR}")
file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/cutecallConfig.cmake" [=[
# cutecall's C++ package: find_package(cutecall CONFIG REQUIRED), then
# target_link_libraries(app PRIVATE cutecall::core). docs/cpp.md.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/cutecallTargets.cmake")
# The target's first name, kept: the same library.
if(NOT TARGET cutecall::bundle)
  add_library(cutecall::bundle INTERFACE IMPORTED)
  set_target_properties(cutecall::bundle PROPERTIES
                        INTERFACE_LINK_LIBRARIES cutecall::core)
endif()
set(cutecall_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../../../include")
get_filename_component(cutecall_INCLUDE_DIR "${cutecall_INCLUDE_DIR}" ABSOLUTE)
]=])
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/cutecallConfigVersion.cmake"
  VERSION "${CUTECALL_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/cutecallConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/cutecallConfigVersion.cmake"
        DESTINATION "${CUTECALL_CMAKE_DIR}")
