# install_consumer (labels cli, install): `cmake --install` of this build into a scratch
# prefix, the example program of tests/install/consumer built against it with pkg-config
# and with find_package and run (once on 2 MPI ranks), the installed dtrain's --help per
# command against the man page (tests/install/install.sh). Not in sanitizer builds: a
# program outside the build would need the sanitizer runtime linked in by hand.
if(NOT DT_SANITIZE AND NOT DT_SANITIZE_THREAD)
  dt_add_cli_test(NAME install_consumer MPI LABELS install TIMEOUT 180
                  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/install.sh ${PROJECT_BINARY_DIR}
                          ${CMAKE_COMMAND} ${CMAKE_C_COMPILER} ${PROJECT_VERSION})
endif()
