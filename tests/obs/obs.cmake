# Where the time goes: the straggler named, the phase table, and a trace of both ranks on one
# clock (python3 reads the JSON, as scripts/check-layers.py needs python3 already), and a
# ConvNet's backward longer than its forward in the phases record.
dt_add_cli_test(NAME cli_obs COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_obs.sh MPI TIMEOUT 120)
# The recorder: totals, events, a full buffer that drops and counts, each phase's name.
dt_add_test(NAME test_obs SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_obs.c LABELS unit TIMEOUT 30)
# dtrain plot: a metrics file, a trace and bench-comm output as SVG pictures (parsed as XML).
dt_add_cli_test(NAME cli_plot COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_plot.sh MPI TIMEOUT 120)
# dtrain plot's ticks read back from the SVG (svg_ticks.py): round values, no repeats, k/M,
# accuracy inside [0, 1], on metrics files of one and three epochs and bench-comm lines.
if(NOT DT_PYTHON3)
  find_program(DT_PYTHON3 NAMES python3)
endif()
dt_add_cli_test(NAME cli_plot_ticks TIMEOUT 30
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/plot_ticks.sh ${DT_PYTHON3})
# TensorBoard event files: every record framed and unpacked by protobuf-c's own reader.
add_executable(tb_read ${CMAKE_CURRENT_LIST_DIR}/tb_read.c ${PROJECT_SOURCE_DIR}/src/cli/tensorboard.c)
target_include_directories(tb_read PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(tb_read PRIVATE ${DT_WARNINGS} ${DT_FLAGS})
target_compile_definitions(tb_read PRIVATE _POSIX_C_SOURCE=200809L)
target_link_libraries(tb_read PRIVATE dt_tensorboard_proto dtrain_static)
dt_add_cli_test(NAME cli_tensorboard TIMEOUT 60
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_tensorboard.sh $<TARGET_FILE:tb_read>
                        ${DT_PYTHON3})
# Optional: TensorBoard's own reader, where bench/.venv has the tensorboard package.
dt_add_cli_test(NAME cli_tensorboard_reader TIMEOUT 120
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/tb_tensorboard.sh)
set_tests_properties(cli_tensorboard_reader PROPERTIES SKIP_RETURN_CODE 77)
# The phase report and the trace through the library at 1-3 ranks (and under the sanitizers):
# the delayed rank named, every rank's events in the file, a full buffer counted.
dt_add_mpi_test(NAME test_obs_mpi SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_obs_mpi.c NP 1 2 3
                TIMEOUT 120)
