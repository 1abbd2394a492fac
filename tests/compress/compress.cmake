# Gradient compression's kernels (src/parallel/compress.c): top-k with error feedback and
# PowerSGD's products and Gram-Schmidt, against references written in the test.
dt_add_test(NAME test_compress SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_compress.c LABELS unit
            TIMEOUT 60)
