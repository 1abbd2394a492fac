# float32 <-> float16 / bfloat16 conversions (src/core/half.c), which the comm layer's
# 16-bit types reduce through.
dt_add_test(NAME test_half SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_half.c LABELS unit TIMEOUT 60)
