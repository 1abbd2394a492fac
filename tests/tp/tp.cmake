# Tensor parallelism: 2 ranks are tp 2, 3 ranks tp 3 (uneven parts), 4 ranks dp 2 x tp 2;
# each equals single-process training.
dt_add_mpi_test(NAME test_tp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tp.c NP 2 3 4 TIMEOUT 240)
# The plan of which layers split, in one process.
dt_add_test(NAME test_tp_plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tp_plan.c LABELS unit
            TIMEOUT 30)
# The CLI: --explain-layout, dp 2 x tp 2 on the seed's linear regression, weights across
# layouts, a tp that does not fit refused.
dt_add_cli_test(NAME cli_tp COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_tp.sh MPI TIMEOUT 180)
# Uneven splits gathered into the whole: each rank's part lands at its own whole indices,
# the initial parameters are one process's bits, a flatten of a split conv at the model's
# end gathers whole channels.
dt_add_mpi_test(NAME test_tp_gather SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tp_gather.c NP 2 3
                TIMEOUT 60)
# Seeded random stacks of conv2d, relu, maxpool2d, flatten and linear (prime widths, widths
# below tp) at tp 2, tp 3 and dp 2 x tp 2 against one process, from the files a user gets:
# weights and checkpoints bitwise equal at step 0, within 1e-5 (parameters) and 1e-4
# (optimizer state) after 3 steps. Two models here; the long tier sweeps 24 more.
find_program(DT_PYTHON3 NAMES python3)
dt_add_cli_test(NAME cli_tp_layouts MPI TIMEOUT 240
                COMMAND ${DT_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tp_layouts.py --dtrain
                        $<TARGET_FILE:dtrain> --mpirun ${MPIEXEC_BIN} --cases 2 --seed 1)
dt_add_cli_test(NAME cli_tp_layouts_sweep MPI TIMEOUT 1500 LABELS long
                COMMAND ${DT_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tp_layouts.py --dtrain
                        $<TARGET_FILE:dtrain> --mpirun ${MPIEXEC_BIN} --cases 24 --seed 2)
# A GPT's blocks split by heads (uneven at tp 2: 3 heads): tensors gathered to their whole
# indices, initial values one process's, a training step with every dropout on equal to
# one process's (recompute none and block), 4 all-reduces per block (6 with recompute block).
dt_add_mpi_test(NAME test_tp_gpt SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tp_gpt.c NP 2 3
                TIMEOUT 60)
