# install.cmake — what `cmake --install` puts in place, and the Debian package that
# `make package` builds from the same rules (CPack). Included by the top-level CMakeLists.txt
# after the targets exist. tests/install/install.sh installs a build into a scratch prefix
# and builds tests/install/consumer/ against it both ways (pkg-config, find_package).
#
#   bin/dtrain                                the command-line tool (libdtrain linked in)
#   lib/libdtrain.so.0.2.0, .so.1, .so        the shared library (SONAME libdtrain.so.1)
#   lib/libdtrain.a                           the static library
#   include/dtrain/*.h                        the public API (every header there)
#   lib/pkgconfig/dtrain.pc                   `pkg-config --cflags --libs dtrain`
#   lib/cmake/dtrain/                         find_package(dtrain): dtrain::dtrain,
#                                             dtrain::dtrain_static (COMPONENTS static)
#   share/man/man1/dtrain.1                   docs/dtrain.1
#   share/doc/dtrain/                         README.md and examples/
#
# lib is CMAKE_INSTALL_LIBDIR (lib/<multiarch> when the prefix is /usr on Debian).

include(CMakePackageConfigHelpers)

set(DT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dtrain)

# ---- the library, the tool, the headers, the man page ----------------------------------
# Users know the libraries as dtrain::dtrain and dtrain::dtrain_static, not by the names
# the build needs to keep the two apart.
set_target_properties(dtrain_shared PROPERTIES EXPORT_NAME dtrain)
set_target_properties(dtrain_static PROPERTIES EXPORT_NAME dtrain_static)

install(TARGETS dtrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS dtrain_shared EXPORT dtrainTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# A separate export set: the static library's users link BLAS, zlib, inih and cJSON too,
# which a program on the shared library should not have to find (dtrainConfig.cmake loads
# it only for COMPONENTS static).
install(TARGETS dtrain_static EXPORT dtrainStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Every header of include/dtrain is public API and includes only its siblings and system
# headers (tests/unit/api.sh compiles each one on its own).
install(DIRECTORY include/dtrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES docs/dtrain.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The configs and library examples the man page and README name.
install(FILES examples/convnet.ini examples/mlp.ini examples/linreg.ini
              examples/train_linreg.c examples/linreg_walkthrough.c
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# ---- find_package(dtrain) ---------------------------------------------------------------
install(EXPORT dtrainTargets NAMESPACE dtrain:: DESTINATION ${DT_INSTALL_CMAKEDIR})
install(EXPORT dtrainStaticTargets NAMESPACE dtrain:: DESTINATION ${DT_INSTALL_CMAKEDIR})
# The MPI compiler wrapper the library was built with (as FindMPI named it: not resolved,
# since Open MPI's wrappers are links to one program that acts on the name it is called
# by): dtrainConfig.cmake gives it to FindMPI unless the consumer chose one.
set(DT_MPI_C_COMPILER "${MPI_C_COMPILER}")
configure_package_config_file(cmake/dtrainConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/dtrainConfig.cmake
                              INSTALL_DESTINATION ${DT_INSTALL_CMAKEDIR})
# 0.x: a new minor version may change the API; the SONAME (CMakeLists.txt) moves when the
# ABI breaks (1 since the strategy kind enum left the public headers).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dtrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dtrainConfig.cmake
              ${PROJECT_BINARY_DIR}/dtrainConfigVersion.cmake
        DESTINATION ${DT_INSTALL_CMAKEDIR})

# ---- dtrain.pc --------------------------------------------------------------------------
# dt_pc_link_flags(OUT items...): linker items as CMake holds them (full paths, -l/-L
# flags, bare names) as pkg-config flags. -L for the compiler's own directories is left
# out: it only adds noise to every user's link line.
function(dt_pc_link_flags out)
  set(flags "")
  foreach(item IN LISTS ARGN)
    if(item MATCHES "^-L(.*)$")
      if(NOT CMAKE_MATCH_1 IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND flags "${item}")
      endif()
    elseif(item MATCHES "^-")
      list(APPEND flags "${item}")
    elseif(IS_ABSOLUTE "${item}" AND item MATCHES "/lib([^/]+)\\.(so|a|dylib)(\\.[0-9.]*)?$")
      set(name "${CMAKE_MATCH_1}")
      get_filename_component(dir "${item}" DIRECTORY)
      if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND flags "-L${dir}")
      endif()
      list(APPEND flags "-l${name}")
    elseif(IS_ABSOLUTE "${item}")
      list(APPEND flags "${item}")
    elseif(NOT item STREQUAL "")
      list(APPEND flags "-l${item}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  string(REPLACE ";" " " flags "${flags}")
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# MPI is a public dependency (comm_mpi.h includes <mpi.h>): Requires the pkg-config module
# of the MPI the library was built with, so that --cflags gives mpi.h's directory and
# --libs -lmpi. Open MPI installs ompi-c, MPICH mpich; without either, FindMPI's paths.
set(DT_PC_REQUIRES "")
set(DT_PC_MPI_CFLAGS "")
set(DT_PC_MPI_LIBS "")
# Which MPI: its mpi.h says (FindMPI's library version string needs a test run).
set(dt_mpi_module "")
set(dt_mpi_h "")
if(EXISTS "${MPI_C_HEADER_DIR}/mpi.h")
  file(STRINGS "${MPI_C_HEADER_DIR}/mpi.h" dt_mpi_h
       REGEX "define (OMPI_MAJOR_VERSION|MPICH_VERSION) ")
endif()
if(dt_mpi_h MATCHES "OMPI_MAJOR_VERSION")
  set(dt_mpi_module ompi-c)
elseif(dt_mpi_h MATCHES "MPICH_VERSION")
  set(dt_mpi_module mpich)
endif()
if(dt_mpi_module)
  execute_process(COMMAND ${PKG_CONFIG_EXECUTABLE} --exists ${dt_mpi_module}
                  RESULT_VARIABLE dt_mpi_module_missing)
  if(dt_mpi_module_missing)
    set(dt_mpi_module "")
  endif()
endif()
if(dt_mpi_module)
  set(DT_PC_REQUIRES ${dt_mpi_module})
else()
  foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
    string(APPEND DT_PC_MPI_CFLAGS " -I${dir}")
  endforeach()
  dt_pc_link_flags(DT_PC_MPI_LIBS ${MPI_C_LIBRARIES})
  if(DT_PC_MPI_LIBS)
    set(DT_PC_MPI_LIBS " ${DT_PC_MPI_LIBS}")
  endif()
endif()

# What libdtrain.a needs besides MPI, for `pkg-config --static --libs dtrain`; as flags
# rather than Requires.private, so that a program on the shared library builds without
# the -dev packages of libraries it never links.
dt_pc_link_flags(DT_PC_LIBS_PRIVATE ${BLAS_LIBRARIES} ${ZLIB_LIBRARIES} ${INIH_LDFLAGS}
                 ${CJSON_LDFLAGS} ${CMAKE_THREAD_LIBS_INIT} m)

# The prefix is the one `cmake --install` installs into (--prefix, CPack's /usr), known only
# then: the file is made at install time from values fixed now.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(DT_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(DT_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(DT_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(DT_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# Every @VAR@ of the template filled in now but DT_PC_PREFIX, which stays as it is.
set(DT_PC_PREFIX "@DT_PC_PREFIX@")
configure_file(cmake/dtrain.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/dtrain.pc.in @ONLY)
install(CODE "
  set(DT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/pkgconfig/dtrain.pc.in\"
                 \"${PROJECT_BINARY_DIR}/pkgconfig/dtrain.pc\" @ONLY)
")
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/dtrain.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- the Debian package (make package: cpack -G DEB) -------------------------------------
if(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  set(DT_PACKAGE_MAINTAINER
      "dtrain maintainers <maintainers@users.noreply.a-seed-8be215e2.example>"
      CACHE STRING "Maintainer field of the Debian package")
  set(CPACK_GENERATOR DEB)
  set(CPACK_PACKAGE_NAME dtrain)
  set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
  set(CPACK_PACKAGE_CONTACT "${DT_PACKAGE_MAINTAINER}")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
  # One line of the control file's extended description each (CPack indents them).
  string(CONCAT CPACK_PACKAGE_DESCRIPTION
         "dtrain trains neural networks described by INI configs, in one process or\n"
         "across MPI ranks (data-, tensor- and pipeline-parallel), with checkpoints\n"
         "and restarts. The package holds the dtrain command and its man page, the\n"
         "libdtrain shared and static libraries with their headers, a pkg-config\n"
         "file and a CMake package config.")
  # Debian's name: dtrain_0.1.0_amd64.deb.
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_SECTION science)
  set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
  # The package config and the pkg-config file live under the prefix /usr (lib/, not
  # lib/<multiarch>, unless the build was configured with the prefix /usr).
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
  set(CPACK_STRIP_FILES ON)
  # A shlibs file for libdtrain.so.1 and ldconfig triggers, as Debian's library packages.
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
  # Runtime dependencies: dpkg-shlibdeps reads them off the binaries (with the versions
  # they were built against) where it exists; otherwise Debian 12's names by hand. mpirun
  # (dtrain launch, `mpirun dtrain train`) is a program, not a library: always by hand.
  find_program(DT_DPKG_SHLIBDEPS dpkg-shlibdeps)
  mark_as_advanced(DT_DPKG_SHLIBDEPS)
  if(DT_DPKG_SHLIBDEPS)
    set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
    set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin")
  else()
    set(CPACK_DEBIAN_PACKAGE_DEPENDS
        "libc6, libopenmpi3, openmpi-bin, libopenblas0, zlib1g, libinih1, libcjson1, libprotobuf-c1")
  endif()
  # Building a program on the library needs MPI's headers (pkg-config's Requires: ompi-c,
  # find_package(MPI)); the static library needs the others' too.
  set(CPACK_DEBIAN_PACKAGE_SUGGESTS
      "libopenmpi-dev, pkg-config, cmake, libopenblas-dev, zlib1g-dev, libinih-dev, libcjson-dev")
  include(CPack)
endif()
