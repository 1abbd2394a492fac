# Data readers (IDX, CSV, synthetic), data set gather/split, and the safetensors format.
foreach(t IN ITEMS test_idx test_csv test_synth test_dataset test_safetensors)
  dt_add_test(NAME ${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.c LABELS unit TIMEOUT 30)
endforeach()
