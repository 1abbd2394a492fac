# The benchmark's start-up figures (bench/bench_train.c): the data loading and the start-up
# read in one process on one clock, so their difference cannot come out negative.
if(NOT DT_PYTHON3)
  find_program(DT_PYTHON3 NAMES python3)
endif()
dt_add_cli_test(NAME bench_startup TIMEOUT 30
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/startup.sh $<TARGET_FILE:bench_train>
                        ${DT_PYTHON3})
