# The installed C++ package (docs/cpp.md): public headers, the core library
# (static, position-independent: bundles, runtime table, module registry,
# C ABI; links only libdl and pthreads) and a CMake package config
# exporting cutecall::bundle. In a wheel (scikit-build-core) it lives inside
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

# What a consumer includes; the other headers of cpp/include are internal.
set(CUTECALL_PUBLIC_HEADERS abi.h bundle.h cutecall_c.h launch_plan.h
    runtime_table.h status.h tensor_ref.h)
list(TRANSFORM CUTECALL_PUBLIC_HEADERS PREPEND
     "${CMAKE_CURRENT_SOURCE_DIR}/cpp/include/cutecall/")

set_target_properties(cutecall_core PROPERTIES EXPORT_NAME bundle)
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
# target_link_libraries(app PRIVATE cutecall::bundle). docs/cpp.md.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/cutecallTargets.cmake")
set(cutecall_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../../../include")
get_filename_component(cutecall_INCLUDE_DIR "${cutecall_INCLUDE_DIR}" ABSOLUTE)
]=])
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/cutecallConfigVersion.cmake"
  VERSION "${CUTECALL_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/cutecallConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/cutecallConfigVersion.cmake"
        DESTINATION "${CUTECALL_CMAKE_DIR}")
