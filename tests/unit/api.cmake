# The public API (tests/unit/api.sh): exports, headers on their own, an example program.
# Label api, not unit: the sanitizer pass would need its runtime linked into the example.
add_test(NAME public_api
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/api.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
                 ${CMAKE_C_COMPILER} "${MPI_C_HEADER_DIR}")
set_tests_properties(public_api PROPERTIES LABELS api TIMEOUT 60 ENVIRONMENT "${DT_TEST_ENV}")
