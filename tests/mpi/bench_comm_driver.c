/* bench_comm_driver.c — runs `dtrain bench-comm` through its entry point, so that it is
 * tested whether or not the main dispatcher lists it. */
#include "cmd_bench_comm.h"

int main(int argc, char **argv)
{
    static char name[] = "bench-comm";
    argv[0] = name;
    return dt_cmd_bench_comm(argc, argv);
}
