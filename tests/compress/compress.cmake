# Gradient compression's kernels (src/parallel/compress.c): top-k with error feedback and
# PowerSGD's products and Gram-Schmidt, against references written in the test.
dt_add_test(NAME test_compress SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_compress.c LABELS unit
            TIMEOUT 60)
# ddp's compressed gradient exchange (src/parallel/gcomp.c) at 1-3 ranks: fp16/bf16 lossless
# on representable values, top-k at ratio 1 the plain sum, error feedback conserving, PowerSGD
# exact on rank-1 gradients, the same bits on every rank.
dt_add_mpi_test(NAME test_gcomp_mpi SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gcomp_mpi.c
                NP 1 2 3 TIMEOUT 60)
# Top-k with and without error feedback on the linear regression, against least squares
# (LAPACKE's dgels, as test_linreg).
find_library(LAPACKE_LIB lapacke)
find_path(LAPACKE_INCLUDE_DIR lapacke.h)
dt_add_mpi_test(NAME test_compress_linreg SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_compress_linreg.c
                ${PROJECT_SOURCE_DIR}/tests/support/linreg_ref.c NP 2 TIMEOUT 60
                LIBS ${LAPACKE_LIB})
target_include_directories(test_compress_linreg PRIVATE ${LAPACKE_INCLUDE_DIR})
# The CLI: top-k at ratio 1 equals no compression byte for byte, every mode's report, refusals.
dt_add_cli_test(NAME cli_compress COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_compress.sh MPI
                TIMEOUT 180 EXPECT "cli_compress: all checks passed")
# Where --compress-warmup ends, under ddp and ps: step N is the first compressed one.
dt_add_cli_test(NAME cli_compress_warmup COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_warmup.sh MPI
                TIMEOUT 180 EXPECT "cli_warmup: all checks passed")
