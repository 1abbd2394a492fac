/* cmd_bench_comm.h — `dtrain bench-comm`: the collectives' time and bandwidth table. */
#ifndef DT_CMD_BENCH_COMM_H
#define DT_CMD_BENCH_COMM_H

/* argv[0] is "bench-comm". Initialises and finalises MPI itself (run it under mpirun).
 * Returns 0 (every result right), 1 (an error or a wrong element), 2 (usage). */
int dt_cmd_bench_comm(int argc, char **argv);

#endif
