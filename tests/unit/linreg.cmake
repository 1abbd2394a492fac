# Linear regression against least squares: LAPACKE's dgels computes the optimum.
find_library(LAPACKE_LIB lapacke)
find_path(LAPACKE_INCLUDE_DIR lapacke.h)
if(NOT LAPACKE_LIB OR NOT LAPACKE_INCLUDE_DIR)
  message(FATAL_ERROR "lapacke not found: install LAPACKE (Debian: liblapacke-dev)")
endif()
dt_add_test(NAME test_linreg SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_linreg.c
            ${PROJECT_SOURCE_DIR}/tests/support/linreg_ref.c LABELS unit
            TIMEOUT 30 LIBS ${LAPACKE_LIB})
target_include_directories(test_linreg PRIVATE ${LAPACKE_INCLUDE_DIR})
