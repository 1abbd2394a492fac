# Checkpoint sets on disk: the manifest's checksum, truncated, bit-flipped, half-written and
# manifest-less sets found and skipped, keeping the last K, a file-size limit that leaves
# the previous file intact.
dt_add_test(NAME test_ckpt_format SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ckpt_format.c
            LABELS unit TIMEOUT 30)
# The non-finite guard (every rank skips together, replicas stay bitwise equal, ZeRO-1
# included; stop names the rank) and dtrain export against PyTorch's outputs, on 1-3 ranks.
dt_add_mpi_test(NAME test_ckpt_mpi SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ckpt_mpi.c NP 1 2 3
                TIMEOUT 120)
