/* comm_cases.h — one collective call checked against the serial reference, shared by the
 * comm tests: the case says which operation, algorithm, type, count and in-place form. */
#ifndef DT_COMM_CASES_H
#define DT_COMM_CASES_H

#include "comm_test_util.h"

typedef struct ct_case {
    dt_comm_coll coll;
    dt_comm_algo algo;
    dt_comm_dtype t;
    dt_comm_redop op;
    size_t count; /* allreduce/bcast/reduce: elements; RS/AG: per rank, or the total (v) */
    int v;        /* reduce-scatter/all-gather: uneven blocks (the v-variant) */
    int in_place; /* 0 no; 1 MPI_IN_PLACE's meaning; 2 reduce-scatter into the own block */
    int root;
    int kind;        /* CT_EXACT or CT_RANDOM */
    int nonblocking; /* start, then progress/test until done, instead of the blocking call */
} ct_case;

/* Runs the case on c (collective) and compares with the reference on this rank; returns 1
 * when this rank's result is right. Prints the case and what differs otherwise. */
int ct_run_case(dt_comm *c, const ct_case *k, uint64_t seed);

#endif
