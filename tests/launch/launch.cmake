# dtrain launch (label cli): its argument errors, and its restart loop driven by a fake
# mpirun (a script the test writes) that fails on cue and writes the checkpoint directories
# itself (valid sets, corrupt ones, cut-short ones), so that the newest-checkpoint scan, the
# restart count, the drop to fewer ranks and the --global-batch that keeps the computation
# the same are checked without MPI or a train command that writes checkpoints.
# python3 writes the fake's checkpoint sets (their CRC-32s; standard library only).
if(NOT DT_PYTHON3)
  find_program(DT_PYTHON3 NAMES python3)
endif()
dt_add_cli_test(NAME cli_launch_args TIMEOUT 60
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/launch_args.sh ${DT_PYTHON3})
# Real failures: kill -9 of a random rank at a random step (three seeded trials) restarts
# from the newest checkpoint and ends bitwise equal to an uninterrupted run; a rank that
# fails every start is dropped (--min-ranks 1) with the same final loss.
dt_add_cli_test(NAME cli_launch_kill COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/launch_kill.sh MPI
                TIMEOUT 240)
