# examples/linreg_walkthrough.c: a program outside the library, built against the public
# headers and the shared library alone (which exports only what include/dtrain/ declares),
# as a user would build it with mpicc. Then run at each layout of the linear regression
# (tests/examples/walkthrough.sh): one process, dp 2, tp 2, tp 3 (uneven rows), dp 2 x tp 2,
# and a world that does not fit its mode refused on every rank.
add_executable(linreg_walkthrough ${PROJECT_SOURCE_DIR}/examples/linreg_walkthrough.c)
target_compile_options(linreg_walkthrough PRIVATE ${DT_WARNINGS} ${DT_FLAGS})
target_link_libraries(linreg_walkthrough PRIVATE dtrain_shared MPI::MPI_C m)

foreach(layout IN ITEMS "single 1" "dp 2" "tp 2" "tp 3" "dptp 4" "refuse 2")
  separate_arguments(args UNIX_COMMAND "${layout}")
  list(GET args 0 mode)
  list(GET args 1 np)
  set(name walkthrough_${mode})
  if(mode STREQUAL "tp" AND NOT np EQUAL 2)
    set(name walkthrough_${mode}${np})
  endif()
  add_test(NAME ${name}
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/walkthrough.sh $<TARGET_FILE:linreg_walkthrough>
                   ${MPIEXEC_BIN} ${PROJECT_SOURCE_DIR} ${mode} ${np})
  set_tests_properties(${name} PROPERTIES LABELS mpi TIMEOUT 60 RESOURCE_LOCK mpi
                       ENVIRONMENT "${DT_TEST_ENV}")
endforeach()
