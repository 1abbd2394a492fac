/* cmd_bench_comm.c — `dtrain bench-comm`, run under mpirun: for every collective and
 * algorithm over a range of sizes, a table in the style of nccl-tests — size, count, type,
 * operation, algorithm, time, algorithm bandwidth, bus bandwidth, and `wrong`, the number of
 * elements that differ from the exact answer (the data are small integers, so every sum is
 * exact in every order and any difference is a bug).
 *
 * Algorithms: bare-mpi (MPI's blocking call, no watchdog: the peer every target is measured
 * against, in the same run), mpi (MPI's non-blocking call polled by the comm layer), ring,
 * det (the deterministic flag) and auto. Bus bandwidth follows nccl-tests: the algorithm
 * bandwidth times 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and all-gather, 1 for
 * broadcast and reduce. Time is the slowest rank's mean over the timed iterations.
 *
 * Beside every table it prints the machine's 2-thread/1-thread parallel ratio, measured on
 * rank 0 with its CPU binding removed while the other ranks sleep: these 2-vCPU machines
 * sometimes deliver only about 1.1 CPUs of parallel work, and a bandwidth figure means
 * little without it.
 *
 * It also prints the bound that the machine's memory bandwidth sets: every rank copies
 * MEMBW_BYTES at once and the copy rates are summed (X bytes per second over the machine).
 * A collective between ranks on one machine copies each byte it moves at least once (Open
 * MPI's shared-memory transport copies once with CMA, twice without), and bus bandwidth is
 * what each of the n ranks moves per second, so busbw <= X / n. Reductions read and write
 * more than a copy, so even a perfect all-reduce stays below it. */
#if defined(__linux__)
#define _GNU_SOURCE /* sched_setaffinity: mpirun binds ranks to cores, the ratio needs both */
#include <sched.h>
#endif
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_bench_comm.h"
#include "dtrain/comm_mpi.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

typedef enum bench_algo {
    ALG_BARE = 0,
    ALG_MPI,
    ALG_RING,
    ALG_DET,
    ALG_AUTO,
    ALG_COUNT
} bench_algo;
static const char *const alg_names[ALG_COUNT] = {"bare-mpi", "mpi", "ring", "det", "auto"};

#define N_OPS 5
static const dt_comm_coll ops[N_OPS] = {DT_COMM_ALLREDUCE, DT_COMM_REDUCE_SCATTER,
                                        DT_COMM_ALLGATHER, DT_COMM_BCAST, DT_COMM_REDUCE};

typedef struct bench_opts {
    size_t min_bytes, max_bytes;
    long iters, warmup;
    unsigned ops_mask, algos_mask;
    int ops_given, algos_given; /* --ops, --algos named their lists (the defaults run each
                                   algorithm where it applies) */
    dt_comm_dtype type;
    double timeout;
    double gap_s; /* computation modelled before each timed call (--gap) */
    const char *json;
} bench_opts;

/* The option table drives both the parser and --help. */
typedef struct bench_option {
    const char *name, *metavar, *def, *help;
} bench_option;
static const bench_option options[] = {
    {"--min-bytes", "N", "1K", "smallest message in bytes (suffixes K, M, G: powers of 1024)"},
    {"--max-bytes", "N", "64M", "largest message; sizes double from the smallest"},
    {"--iters", "N", "0",
     "timed iterations per size; 0 = about 50 ms of them (3 to 1000; with --gap, at most "
     "half a second of calls and gaps)"},
    {"--warmup", "N", "2", "untimed iterations per size before the timed ones"},
    {"--ops", "LIST", "allreduce,reduce_scatter,allgather,bcast,reduce", "collectives"},
    {"--algos", "LIST", "bare-mpi,mpi,ring,det,auto", "algorithms (each runs where it applies)"},
    {"--type", "T", "float32", "float32, float64, int32, int64 or uint8"},
    {"--timeout", "S", "300", "the comm layer's watchdog deadline per call, seconds"},
    {"--gap", "MS", "0",
     "spin MS milliseconds of computation before each timed call, as a training step does, "
     "and time the calls alone"},
    {"--json", "FILE", "", "also write one JSON object per row (JSON lines)"},
    {"--help", NULL, NULL, "this text"},
};
#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: mpirun -np N dtrain bench-comm [options]\n\n"
                 "Times every collective and algorithm over a range of sizes and checks each "
                 "result\nagainst the exact answer (column `wrong`).\n\noptions:\n");
    for (int i = 0; i < N_OPTIONS; i++) {
        char left[40];
        snprintf(left, sizeof left, "%s%s%s", options[i].name, options[i].metavar ? " " : "",
                 options[i].metavar ? options[i].metavar : "");
        fprintf(out, "  %-20s %s", left, options[i].help);
        if (options[i].def && options[i].def[0])
            fprintf(out, " (default %s)", options[i].def);
        fputc('\n', out);
    }
}

static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0))
        return 0;
    double mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024.0 * 1024.0, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024.0 * 1024.0 * 1024.0, end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || v * mul > 1e15)
        return 0;
    *out = (size_t)(v * mul);
    return 1;
}

/* --iters and --warmup: 0 to a billion calls. */
static int parse_calls(const char *s, long *out)
{
    long long v = 0;
    if (!dt_cli_whole(s, 0, 1000000000LL, &v))
        return 0;
    *out = (long)v;
    return 1;
}

/* A comma list of names -> bit mask; 0 on an unknown name. */
static unsigned parse_list(const char *s, const char *const *names, int n, const char **bad)
{
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
        int found = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(tok, names[i]) == 0)
                found = i;
        if (found < 0) {
            static char badbuf[64];
            snprintf(badbuf, sizeof badbuf, "%s", tok);
            *bad = badbuf;
            return 0;
        }
        mask |= 1u << found;
    }
    return mask;
}

/* Returns EXIT_OK, EXIT_USAGE, or -1 after --help. */
static int parse(int argc, char **argv, bench_opts *o)
{
    const char *op_names[N_OPS];
    for (int i = 0; i < N_OPS; i++)
        op_names[i] = dt_comm_coll_name(ops[i]);
    /* The types put(), equals() and the bare-mpi rows handle: the comm layer's first five.
     * float16 and bfloat16 have no MPI type or operation for bare-mpi to call. */
    enum { BENCH_TYPES = DT_COMM_UINT8 + 1 };
    const char *type_names[BENCH_TYPES];
    for (int i = 0; i < BENCH_TYPES; i++)
        type_names[i] = dt_comm_dtype_name((dt_comm_dtype)i);
    o->min_bytes = 1024;
    o->max_bytes = (size_t)64 << 20;
    o->iters = 0;
    o->warmup = 2;
    o->ops_mask = (1u << N_OPS) - 1;
    o->algos_mask = (1u << ALG_COUNT) - 1;
    o->type = DT_COMM_FLOAT32;
    o->timeout = 300;
    o->gap_s = 0;
    o->json = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL, *bad = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return -1;
        }
        int known = 0;
        for (int k = 0; k < N_OPTIONS; k++)
            known |= strcmp(a, options[k].name) == 0;
        if (!known) {
            fprintf(stderr, "dtrain bench-comm: unknown option '%s'\n\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
        if (v == NULL) {
            fprintf(stderr, "dtrain bench-comm: %s needs a value\n", a);
            return EXIT_USAGE;
        }
        i++;
        int ok = 1;
        unsigned type_mask = 0;
        if (strcmp(a, "--min-bytes") == 0)
            ok = parse_size(v, &o->min_bytes) && o->min_bytes > 0;
        else if (strcmp(a, "--max-bytes") == 0)
            ok = parse_size(v, &o->max_bytes);
        else if (strcmp(a, "--iters") == 0)
            ok = parse_calls(v, &o->iters);
        else if (strcmp(a, "--warmup") == 0)
            ok = parse_calls(v, &o->warmup);
        else if (strcmp(a, "--ops") == 0) {
            ok = (o->ops_mask = parse_list(v, op_names, N_OPS, &bad)) != 0;
            o->ops_given = 1;
        } else if (strcmp(a, "--algos") == 0) {
            ok = (o->algos_mask = parse_list(v, alg_names, ALG_COUNT, &bad)) != 0;
            o->algos_given = 1;
        } else if (strcmp(a, "--type") == 0) {
            type_mask = parse_list(v, type_names, BENCH_TYPES, &bad);
            ok = type_mask != 0 && (type_mask & (type_mask - 1)) == 0;
            for (int t = 0; t < BENCH_TYPES && ok; t++)
                if (type_mask == 1u << t)
                    o->type = (dt_comm_dtype)t;
        } else if (strcmp(a, "--timeout") == 0)
            ok = dt_cli_real(v, 0, 1e9, &o->timeout) && o->timeout > 0;
        else if (strcmp(a, "--gap") == 0) {
            double ms = 0;
            ok = dt_cli_real(v, 0, 1e4, &ms);
            o->gap_s = ms * 1e-3;
        } else if (strcmp(a, "--json") == 0)
            o->json = v;
        if (!ok) {
            fprintf(stderr, "dtrain bench-comm: %s '%s': %s%s\n", a, v,
                    bad ? "unknown name " : "not a valid value", bad ? bad : "");
            return EXIT_USAGE;
        }
    }
    if (o->max_bytes < o->min_bytes) {
        fprintf(stderr, "dtrain bench-comm: --max-bytes %zu is below --min-bytes %zu\n",
                o->max_bytes, o->min_bytes);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* ---- the machine's parallel ratio ---- */

typedef struct spin_arg {
    long work;
    double result;
} spin_arg;

static void *spin(void *p)
{
    spin_arg *s = p;
    /* four independent chains keep the core's pipeline full: a throughput, not latency,
     * measure of one core */
    double a = 1.0, b = 2.0, c = 3.0, d = 4.0;
    for (long k = 0; k < s->work; k++) {
        a = a * 0.9999999 + 1e-7;
        b = b * 0.9999999 + 1e-7;
        c = c * 0.9999999 + 1e-7;
        d = d * 0.9999999 + 1e-7;
    }
    s->result = a + b + c + d;
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Time of `nthreads` threads each doing `work`, with the process free to use every CPU. */
static double timed_threads(int nthreads, long work)
{
    pthread_t th[2];
    spin_arg arg[2] = {{work, 0}, {work, 0}};
    double t0 = now_s();
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, spin, &arg[i]) != 0)
            return -1;
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    return now_s() - t0;
}

/* 2 x time(1 thread) / time(2 threads at once): 2.0 means two full cores. */
static double parallel_ratio(void)
{
#if defined(__linux__)
    cpu_set_t old, all;
    int have_old = sched_getaffinity(0, sizeof old, &old) == 0;
    CPU_ZERO(&all);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < ncpu && i < CPU_SETSIZE; i++)
        CPU_SET((int)i, &all);
    sched_setaffinity(0, sizeof all, &all);
#endif
    long work = 20000000;
    double t1 = timed_threads(1, work);
    double t2 = timed_threads(2, work);
#if defined(__linux__)
    if (have_old)
        sched_setaffinity(0, sizeof old, &old);
#endif
    return t1 > 0 && t2 > 0 ? 2.0 * t1 / t2 : NAN;
}

/* The other ranks wait for rank 0's measurement asleep, not spinning. */
static void sleepy_barrier(MPI_Comm comm)
{
    MPI_Request rq;
    int done = 0;
    MPI_Ibarrier(comm, &rq);
    while (!done) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (!done) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

static double measured_ratio(MPI_Comm comm, int rank)
{
    double r = 0;
    sleepy_barrier(comm);
    if (rank == 0)
        r = parallel_ratio();
    sleepy_barrier(comm);
    MPI_Bcast(&r, 1, MPI_DOUBLE, 0, comm);
    return r;
}

/* ---- the bound set by memory bandwidth ---- */

/* 64 MiB: far beyond any cache here, the size of the largest default message. */
#define MEMBW_BYTES ((size_t)64 << 20)

/* Every rank copies MEMBW_BYTES at the same time, three times; the best of each rank's rates,
 * summed over the ranks, is the machine's copy bandwidth X (bytes/s). Returns X / n in GB/s,
 * the bus bandwidth no collective can exceed (file comment), or 0 when n = 1 or the buffers
 * cannot be had. Collective. */
static double memory_bound(MPI_Comm comm, int size)
{
    void *ps = NULL, *pd = NULL; /* on huge pages, as the collectives' buffers (below) */
    int have = dt_alloc_large(MEMBW_BYTES, "bound source", &ps) == DT_OK &&
               dt_alloc_large(MEMBW_BYTES, "bound destination", &pd) == DT_OK,
        all = 0;
    char *src = ps, *dst = pd;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, comm);
    double best = 0, sum = 0;
    if (all) {
        memset(src, 1, MEMBW_BYTES); /* dst was zeroed: both touched outside the timing */
        for (int rep = 0; rep < 3; rep++) {
            MPI_Barrier(comm);
            double t0 = now_s();
            memcpy(dst, src, MEMBW_BYTES);
            double t = now_s() - t0;
            if (t > 0 && (double)MEMBW_BYTES / t > best)
                best = (double)MEMBW_BYTES / t;
        }
    }
    MPI_Allreduce(&best, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
    dt_free(src);
    dt_free(dst);
    return all && size > 1 ? sum / size / 1e9 : 0;
}

/* ---- data and the exact answer ---- */

/* Rank p's element i: a small integer, so every sum of a few ranks is exact. */
static double value(int p, size_t i)
{
    return (double)((i * 7 + (size_t)p * 3) % 11);
}

static void put(dt_comm_dtype t, void *buf, size_t i, double v)
{
    switch (t) {
    case DT_COMM_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case DT_COMM_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    case DT_COMM_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case DT_COMM_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case DT_COMM_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)((uint64_t)v % 256u);
        break;
    default:
        break;
    }
}

/* Whether element i of buf equals v as stored in the type (uint8 sums wrap). */
static int equals(dt_comm_dtype t, const void *buf, size_t i, double v)
{
    switch (t) {
    case DT_COMM_FLOAT32:
        return ((const float *)buf)[i] == (float)v;
    case DT_COMM_FLOAT64:
        return ((const double *)buf)[i] == v;
    case DT_COMM_INT32:
        return ((const int32_t *)buf)[i] == (int32_t)v;
    case DT_COMM_INT64:
        return ((const int64_t *)buf)[i] == (int64_t)v;
    case DT_COMM_UINT8:
        return ((const uint8_t *)buf)[i] == (uint8_t)((uint64_t)v % 256u);
    default:
        return 0;
    }
}

static double sum_over_ranks(int n, size_t i)
{
    double s = 0;
    for (int p = 0; p < n; p++)
        s += value(p, i);
    return s;
}

/* ---- one row ---- */

typedef struct bench {
    bench_opts o;
    MPI_Comm mpi; /* our duplicate of the world, for the bare-mpi rows */
    dt_comm *comm;
    int rank, size;
    size_t esize;
    char *send, *recv;
    FILE *json;
    double ratio;
    double mem_bound; /* GB/s per rank that the machine's copy bandwidth allows; 0 at n = 1 */
} bench;

typedef struct row {
    size_t bytes, count, per;
    double time_s;
    long iters;
    long long wrong;
} row;

static int applies(dt_comm_coll op, bench_algo alg)
{
    if (alg == ALG_RING)
        return op == DT_COMM_ALLREDUCE || op == DT_COMM_REDUCE_SCATTER || op == DT_COMM_ALLGATHER;
    if (alg == ALG_DET)
        return op == DT_COMM_ALLREDUCE || op == DT_COMM_REDUCE_SCATTER || op == DT_COMM_REDUCE;
    return 1;
}

/* 1 when some algorithm of `algos` (a mask of bench_algo bits) runs `op`. */
static int op_runs(unsigned algos, dt_comm_coll op)
{
    for (int a = 0; a < ALG_COUNT; a++)
        if ((algos & (1u << a)) && applies(op, (bench_algo)a))
            return 1;
    return 0;
}

/* An operation named in --ops that no algorithm of the list runs, or an algorithm named in
 * --algos that runs none of the operations, is refused: it used to be left out unsaid (and
 * `--ops bcast --algos ring` printed an empty table). Of default lists, each algorithm runs
 * where it applies. */
static int check_pairs(const bench_opts *o)
{
    for (int oi = 0; oi < N_OPS; oi++) {
        if (o->ops_given && (o->ops_mask & (1u << oi)) && !op_runs(o->algos_mask, ops[oi])) {
            fprintf(stderr,
                    "dtrain bench-comm: no algorithm of --algos runs %s (ring runs allreduce, "
                    "reduce_scatter and allgather; det allreduce, reduce_scatter and reduce)\n",
                    dt_comm_coll_name(ops[oi]));
            return EXIT_USAGE;
        }
    }
    for (int a = 0; a < ALG_COUNT && o->algos_given; a++) {
        int any = 0;
        for (int oi = 0; oi < N_OPS; oi++)
            any |= (o->ops_mask & (1u << oi)) && applies(ops[oi], (bench_algo)a);
        if ((o->algos_mask & (1u << a)) && !any) {
            fprintf(stderr, "dtrain bench-comm: --algos %s runs none of --ops's operations\n",
                    alg_names[a]);
            return EXIT_USAGE;
        }
    }
    return EXIT_OK;
}

static int run_once(bench *b, dt_comm_coll op, bench_algo alg, const row *r)
{
    MPI_Datatype mt = MPI_FLOAT;
    switch (b->o.type) {
    case DT_COMM_FLOAT64:
        mt = MPI_DOUBLE;
        break;
    case DT_COMM_INT32:
        mt = MPI_INT32_T;
        break;
    case DT_COMM_INT64:
        mt = MPI_INT64_T;
        break;
    case DT_COMM_UINT8:
        mt = MPI_UINT8_T;
        break;
    default:
        break;
    }
    if (alg == ALG_BARE) {
        int c = (int)r->count, per = (int)r->per, err = MPI_SUCCESS;
        switch (op) {
        case DT_COMM_ALLREDUCE:
            err = MPI_Allreduce(b->send, b->recv, c, mt, MPI_SUM, b->mpi);
            break;
        case DT_COMM_REDUCE_SCATTER:
            err = MPI_Reduce_scatter_block(b->send, b->recv, per, mt, MPI_SUM, b->mpi);
            break;
        case DT_COMM_ALLGATHER:
            err = MPI_Allgather(b->send, per, mt, b->recv, per, mt, b->mpi);
            break;
        case DT_COMM_BCAST:
            err = MPI_Bcast(b->recv, c, mt, 0, b->mpi);
            break;
        case DT_COMM_REDUCE:
            err = MPI_Reduce(b->send, b->recv, c, mt, MPI_SUM, 0, b->mpi);
            break;
        default:
            break;
        }
        if (err != MPI_SUCCESS) {
            fprintf(stderr, "dtrain bench-comm: rank %d: MPI error %d in %s\n", b->rank, err,
                    dt_comm_coll_name(op));
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL); /* the others would wait for this rank */
        }
        return 1;
    }
    dt_comm_args a = dt_comm_args_init(op);
    a.sendbuf = op == DT_COMM_BCAST ? NULL : b->send;
    a.recvbuf = b->recv;
    a.count = op == DT_COMM_REDUCE_SCATTER || op == DT_COMM_ALLGATHER ? r->per : r->count;
    a.dtype = b->o.type;
    a.op = DT_COMM_SUM;
    a.algo = alg == ALG_MPI    ? DT_COMM_ALGO_MPI
             : alg == ALG_RING ? DT_COMM_ALGO_RING
                               : DT_COMM_ALGO_AUTO;
    dt_status st = dt_comm_run(b->comm, &a);
    if (st != DT_OK) {
        fprintf(stderr, "dtrain bench-comm: rank %d: %s\n%s", b->rank, dt_last_error(),
                dt_comm_last_report(b->comm));
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL); /* the others would wait for this rank */
    }
    return 1;
}

/* Fills the inputs for `op`. */
static void fill(bench *b, dt_comm_coll op, const row *r)
{
    size_t n_in = op == DT_COMM_REDUCE_SCATTER ? r->count
                  : op == DT_COMM_ALLGATHER    ? r->per
                                               : r->count;
    for (size_t i = 0; i < n_in; i++)
        put(b->o.type, b->send, i, value(b->rank, i));
    if (op == DT_COMM_BCAST)
        for (size_t i = 0; i < r->count; i++)
            put(b->o.type, b->recv, i, value(b->rank == 0 ? 0 : b->rank + 1, i));
}

/* One verified run: the result against the exact answer; returns wrong elements here. */
static long long verify(bench *b, dt_comm_coll op, bench_algo alg, const row *r, int *ok)
{
    fill(b, op, r);
    if (op != DT_COMM_BCAST)
        memset(b->recv, 0xff, r->count * b->esize); /* NaN / -1: stale data cannot pass */
    *ok = run_once(b, op, alg, r);
    long long wrong = 0;
    int n = b->size;
    switch (op) {
    case DT_COMM_ALLREDUCE:
        for (size_t i = 0; i < r->count; i++)
            wrong += !equals(b->o.type, b->recv, i, sum_over_ranks(n, i));
        break;
    case DT_COMM_REDUCE:
        if (b->rank == 0)
            for (size_t i = 0; i < r->count; i++)
                wrong += !equals(b->o.type, b->recv, i, sum_over_ranks(n, i));
        break;
    case DT_COMM_REDUCE_SCATTER:
        for (size_t i = 0; i < r->per; i++)
            wrong +=
                !equals(b->o.type, b->recv, i, sum_over_ranks(n, (size_t)b->rank * r->per + i));
        break;
    case DT_COMM_ALLGATHER:
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < r->per; i++)
                wrong += !equals(b->o.type, b->recv, (size_t)p * r->per + i, value(p, i));
        break;
    case DT_COMM_BCAST:
        for (size_t i = 0; i < r->count; i++)
            wrong += !equals(b->o.type, b->recv, i, value(0, i));
        break;
    default:
        break;
    }
    return wrong;
}

/* A training step computes between its collectives: the link idles, the shaper's and TCP's
 * queues drain, and the next call starts on an empty pipe. --gap models that with a spin on
 * the clock (not a sleep: a sleeping rank would add its wake-up to the next call). */
static void busy_wait(double s)
{
    if (s <= 0)
        return;
    const double until = MPI_Wtime() + s;
    while (MPI_Wtime() < until)
        ;
}

static int measure(bench *b, dt_comm_coll op, bench_algo alg, row *r)
{
    dt_comm_options co = dt_comm_options_default();
    co.timeout_s = b->o.timeout;
    co.deterministic = alg == ALG_DET;
    if (dt_comm_set_options(b->comm, &co) != DT_OK) {
        fprintf(stderr, "dtrain bench-comm: %s\n", dt_last_error());
        return 0;
    }
    int ok = 1;
    fill(b, op, r);
    /* The last warm-up call (or one extra call without warm-up) is timed: with --iters 0 it
     * sets the count, about 50 ms of calls, the slowest rank deciding. */
    double one = 0;
    long calls = b->o.warmup > 0 ? b->o.warmup : (b->o.iters == 0);
    for (long w = 0; w < calls && ok; w++) {
        double t0 = MPI_Wtime();
        ok = run_once(b, op, alg, r);
        one = MPI_Wtime() - t0;
    }
    long iters = b->o.iters;
    if (iters == 0) {
        double worst = 0;
        MPI_Allreduce(&one, &worst, 1, MPI_DOUBLE, MPI_MAX, b->mpi);
        iters = worst > 0 ? (long)(0.05 / worst) : 1000;
        if (b->o.gap_s > 0 && (double)iters * (worst + b->o.gap_s) > 0.5) /* half a second */
            iters = (long)(0.5 / (worst + b->o.gap_s));
        iters = iters < 3 ? 3 : iters > 1000 ? 1000 : iters;
    }
    MPI_Barrier(b->mpi);
    double spent = 0;
    for (long k = 0; k < iters && ok; k++) {
        busy_wait(b->o.gap_s);
        double t0 = MPI_Wtime();
        ok = run_once(b, op, alg, r);
        spent += MPI_Wtime() - t0;
    }
    double mine = spent / (double)(iters ? iters : 1), worst = 0;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, b->mpi);
    long long wrong = verify(b, op, alg, r, &ok), total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, b->mpi);
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b->mpi);
    r->time_s = worst;
    r->iters = iters;
    r->wrong = total;
    return all_ok;
}

static double bus_factor(dt_comm_coll op, int n)
{
    if (op == DT_COMM_ALLREDUCE)
        return 2.0 * (n - 1) / n;
    if (op == DT_COMM_REDUCE_SCATTER || op == DT_COMM_ALLGATHER)
        return (double)(n - 1) / n;
    return 1.0;
}

static void header(bench *b, dt_comm_coll op)
{
    if (b->rank != 0)
        return;
    printf("\n# %s over %d ranks, %s, sum; warm-up %ld, iterations %s", dt_comm_coll_name(op),
           b->size, dt_comm_dtype_name(b->o.type), b->o.warmup,
           b->o.iters ? "as given" : "about 50 ms per row");
    if (b->o.gap_s > 0)
        printf("; %.1f ms of computation spun before each timed call", b->o.gap_s * 1e3);
    printf("\n");
    printf("# machine parallel ratio (2 threads / 1 thread, CPU binding removed): %.2f "
           "(2.00 = two full cores)\n",
           b->ratio);
    if (b->mem_bound > 0)
        printf("# memory bound: the ranks copy %.2f GB/s in all (%d x 64 MiB memcpy at once); "
               "bus bandwidth <= %.3f GB/s per rank\n",
               b->mem_bound * b->size, b->size, b->mem_bound);
    printf("# %12s %12s %8s %15s %9s %11s %11s %11s %7s\n", "size(B)", "count", "type", "operation",
           "algorithm", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "wrong");
    fflush(stdout);
}

static void print_row(bench *b, dt_comm_coll op, bench_algo alg, const row *r)
{
    if (b->rank != 0)
        return;
    double algbw = r->time_s > 0 ? (double)r->bytes / r->time_s / 1e9 : 0;
    double busbw = algbw * bus_factor(op, b->size);
    printf("  %12zu %12zu %8s %15s %9s %11.2f %11.3f %11.3f %7lld\n", r->bytes, r->count,
           dt_comm_dtype_name(b->o.type), dt_comm_coll_name(op), alg_names[alg], r->time_s * 1e6,
           algbw, busbw, r->wrong);
    fflush(stdout);
    if (b->json)
        fprintf(b->json,
                "{\"ranks\": %d, \"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
                "\"operation\": \"%s\", \"algorithm\": \"%s\", \"time_us\": %.3f, "
                "\"algbw_GBps\": %.4f, \"busbw_GBps\": %.4f, \"wrong\": %lld, \"iters\": %ld, "
                "\"parallel_ratio\": %.3f, \"mem_bound_GBps\": %.4f, \"gap_ms\": %.3f}\n",
                b->size, r->bytes, r->count, dt_comm_dtype_name(b->o.type), dt_comm_coll_name(op),
                alg_names[alg], r->time_s * 1e6, algbw, busbw, r->wrong, r->iters, b->ratio,
                b->mem_bound, b->o.gap_s * 1e3);
}

static int run_all(bench *b)
{
    long long wrong = 0;
    for (int oi = 0; oi < N_OPS; oi++) {
        dt_comm_coll op = ops[oi];
        /* an operation no algorithm of the list runs gets no empty table */
        if (!(b->o.ops_mask & (1u << oi)) || !op_runs(b->o.algos_mask, op))
            continue;
        b->ratio = measured_ratio(b->mpi, b->rank);
        b->mem_bound = memory_bound(b->mpi, b->size);
        header(b, op);
        for (size_t bytes = b->o.min_bytes; bytes <= b->o.max_bytes; bytes *= 2) {
            row r = {0};
            r.count = bytes / b->esize;
            /* reduce-scatter and all-gather move equal blocks: the size is the whole
             * vector, rounded down to a multiple of the group */
            r.per = r.count / (size_t)b->size;
            if (op == DT_COMM_REDUCE_SCATTER || op == DT_COMM_ALLGATHER)
                r.count = r.per * (size_t)b->size;
            r.bytes = r.count * b->esize;
            if (r.count == 0 || r.count > (size_t)INT32_MAX)
                continue;
            for (int a = 0; a < ALG_COUNT; a++) {
                if (!(b->o.algos_mask & (1u << a)) || !applies(op, (bench_algo)a))
                    continue;
                if (!measure(b, op, (bench_algo)a, &r))
                    return EXIT_FAIL;
                print_row(b, op, (bench_algo)a, &r);
                wrong += r.wrong;
            }
            if (bytes > SIZE_MAX / 2)
                break;
        }
    }
    if (b->rank == 0 && wrong > 0)
        fprintf(stderr, "dtrain bench-comm: %lld wrong elements in total\n", wrong);
    return wrong > 0 ? EXIT_FAIL : EXIT_OK;
}

int dt_cmd_bench_comm(int argc, char **argv)
{
    bench b;
    memset(&b, 0, sizeof b);
    int rc = parse(argc, argv, &b.o);
    if (rc == EXIT_OK)
        rc = check_pairs(&b.o);
    if (rc != EXIT_OK)
        return rc < 0 ? EXIT_OK : rc;
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "dtrain bench-comm: MPI_Init_thread failed\n");
        return EXIT_FAIL;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &b.mpi);
    MPI_Comm_rank(b.mpi, &b.rank);
    MPI_Comm_size(b.mpi, &b.size);
    b.esize = dt_comm_dtype_size(b.o.type);
    rc = EXIT_FAIL;
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &b.comm) != DT_OK) {
        fprintf(stderr, "dtrain bench-comm: %s\n", dt_last_error());
        goto done;
    }
    /* Allocated as dtrain allocates the gradients it all-reduces (huge pages from 2 MiB,
     * core.h), and zeroed there: first touch outside the timed loops. MPI's calls use the
     * same buffers. */
    void *ps = NULL, *pr = NULL;
    int have = dt_alloc_large(b.o.max_bytes + b.esize, "bench send buffer", &ps) == DT_OK &&
               dt_alloc_large(b.o.max_bytes + b.esize, "bench receive buffer", &pr) == DT_OK;
    b.send = ps;
    b.recv = pr;
    int all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, b.mpi);
    if (!all) {
        if (!have)
            fprintf(stderr, "dtrain bench-comm: rank %d: cannot allocate 2 x %zu bytes\n", b.rank,
                    b.o.max_bytes);
        goto done;
    }
    if (b.o.json && b.rank == 0 && (b.json = fopen(b.o.json, "w")) == NULL)
        fprintf(stderr, "dtrain bench-comm: cannot write %s\n", b.o.json);
    if (b.rank == 0) {
        char host[256] = "?";
        gethostname(host, sizeof host);
        printf("# dtrain bench-comm: %d ranks on %s; sizes %zu..%zu bytes\n", b.size, host,
               b.o.min_bytes, b.o.max_bytes);
        printf("# bare-mpi: MPI's blocking call, no watchdog; mpi: MPI's non-blocking call "
               "polled by dtrain;\n# ring, det (deterministic flag), auto: dtrain's "
               "algorithms, watchdog on\n");
    }
    rc = run_all(&b);
done:
    if (b.json)
        fclose(b.json);
    dt_free(b.send);
    dt_free(b.recv);
    dt_comm_free(b.comm);
    MPI_Comm_free(&b.mpi);
    MPI_Finalize();
    return rc;
}
