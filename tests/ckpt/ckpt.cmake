# Checkpoint sets on disk: the manifest's checksum, truncated, bit-flipped, half-written and
# manifest-less sets found and skipped, keeping the last K, a file-size limit that leaves
# the previous file intact.
dt_add_test(NAME test_ckpt_format SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ckpt_format.c
            LABELS unit TIMEOUT 30)
# The non-finite guard (every rank skips together, replicas stay bitwise equal, ZeRO-1
# included; stop names the rank), top-k residuals of 2 saved replicas resharded (2-3 ranks)
# and dtrain export against PyTorch's outputs, a stop asked of one rank (dt_trainer_request_stop)
# that every rank takes after the same step, on 1-3 ranks.
dt_add_mpi_test(NAME test_ckpt_mpi SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ckpt_mpi.c NP 1 2 3
                TIMEOUT 120)
# The CLI: resume bit-exact (1 rank; 2 ranks with ZeRO-1), resume at dp 1, tp 2 and pp 2 with
# the same next loss, broken sets skipped, a file-size limit, inspect, export and eval.
dt_add_cli_test(NAME cli_ckpt COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_ckpt.sh MPI TIMEOUT 240)
# A save and a load hold one tensor at a time: the peak bytes in flight (alloc_count.c) under
# ddp, ZeRO-1, tp 2 and pp 2 stay under 3 x the largest tensor + 64 KiB + 2 KiB per tensor,
# far below the model's state; the parameters come back exactly. The same for the weight file
# (--save-weights, --init-weights) under pp 2 (contiguous, round robin) and tp 2, whose bytes
# are dt_weights_write's. Label alloc: malloc is replaced (no sanitizer build).
dt_add_mpi_test(NAME test_ckpt_mem SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ckpt_mem.c
                ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c NP 2 LABELS alloc TIMEOUT 60)
# A run stopped on its signal (--stop-on): the ranks stop after the same step (the signal on
# one rank, on mpirun, under a pipeline), write its checkpoint and exit 4, the resumed run
# ends with the uninterrupted one's bytes; launch does not restart it; ps is refused.
dt_add_cli_test(NAME cli_stop COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_stop.sh MPI TIMEOUT 180)
# The same stop and resume across the layouts whose checkpoints hold more than weights (the
# GPT at dp x tp, SP, a tied pipeline, ZeRO-1, accumulation; localsgd mid-period; top-k and
# PowerSGD residuals): the uninterrupted run's bytes each time. Long tier.
dt_add_cli_test(NAME cli_stop_layouts_long COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/stop_layouts.sh MPI
                TIMEOUT 600 LABELS long)
