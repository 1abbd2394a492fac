dt_add_test(NAME test_e2e_pytorch SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_e2e.c
            LABELS ref TIMEOUT 120)
# The ConvNet's weights through the CLI (--save-weights, then --init-weights) on a small
# IDX directory; any python3 reads the header (standard library only).
if(NOT DT_PYTHON3)
  find_program(DT_PYTHON3 NAMES python3)
endif()
dt_add_cli_test(NAME cli_weights_convnet TIMEOUT 60
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/weights_convnet.sh ${DT_PYTHON3})
