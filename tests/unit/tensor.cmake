# The step's C = A B products (src/tensor/gemm.c): OpenBLAS for whole blocks of 16 columns,
# our own loop for the rest, against an exact reference.
dt_add_test(NAME test_gemm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gemm.c LABELS unit TIMEOUT 60)
