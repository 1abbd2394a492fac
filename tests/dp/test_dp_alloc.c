/* test_dp_alloc.c — a data-parallel training run allocates nothing in our code, with the
 * ring all-reduce, with MPI's own, with tensor parallelism at tp 2, with a pipeline of 2
 * stages (GPipe and 1F1B, 4 micro-batches), with each gradient compression, under the
 * ps (staleness 0 and 2, top-k and PowerSGD pushes), fedavg (plain, top-k and fp16 updates)
 * and localsgd strategies, under ZeRO-3, and a GPT on text at tp 2 with and without sequence
 * parallelism and under ZeRO-3. Counts
 * malloc and friends in the whole process (alloc_count.c) from the call of dt_trainer_run to its
 * return, the first step included (a buffer grown lazily in the first step would escape a count
 * from the second), Open MPI's own calls apart: it allocates a temporary inside MPI_Iallreduce on
 * every call (docs/NOTES.md), 7 to 18 times a rank in the first step of these runs (measured here),
 * and buffers a message that arrives before its receive is posted, as the ranks' timing dictates;
 * those are printed, not checked. CTest runs it under every OpenBLAS kernel set the CPU executes
 * (tests/dp/dp.cmake): OpenBLAS's AVX-512 kernels malloc inside some products that the others
 * compute without (src/tensor/gemm.h). */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "alloc_count.h"
#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"

static dt_comm *world;
static int rank, size;

/* pp: 0 none, else a pipeline of 2 stages on the schedule "gpipe" or "1f1b" it names;
 * extra: more settings (key=value), NULL-terminated, or NULL. */
static long steps_allocations_with(const char *algorithm, int tp, const char *pp,
                                   const char *const *extra)
{
    dt_config c = dt_config_default();
    char kv[64];
    snprintf(kv, sizeof kv, "comm.algorithm=%s", algorithm);
    DT_ASSERT_OK(dt_config_set(&c,
                               "model.layers=flatten, linear 128, relu, dropout 0.2, "
                               "linear 10",
                               "test"));
    DT_ASSERT_OK(dt_config_set(&c, "loss.kind=cross_entropy", "test"));
    DT_ASSERT_OK(dt_config_set(&c, "train.max_steps=8", "test"));
    DT_ASSERT_OK(dt_config_set(&c, "train.eval=off", "test"));
    DT_ASSERT_OK(dt_config_set(&c, kv, "test"));
    if (tp) { /* column, row, then column gathered at the end: every tp collective */
        DT_ASSERT_OK(dt_config_set(&c,
                                   "model.layers=flatten, linear 64, relu, dropout 0.2, "
                                   "linear 32, relu, linear 10",
                                   "test"));
        DT_ASSERT_OK(dt_config_set(&c, "parallel.tp=2", "test"));
        DT_ASSERT_OK(dt_config_set(&c, "parallel.tp_min_weights=0", "test"));
    }
    if (pp != NULL) { /* messages both ways, micro-batches in rows */
        char sk[64];
        snprintf(sk, sizeof sk, "parallel.pp_schedule=%s", pp);
        DT_ASSERT_OK(dt_config_set(&c, "parallel.pp=2", "test"));
        DT_ASSERT_OK(dt_config_set(&c, "parallel.micro_batches=4", "test"));
        DT_ASSERT_OK(dt_config_set(&c, sk, "test"));
    }
    for (int k = 0; extra != NULL && extra[k] != NULL; k++)
        DT_ASSERT_OK(dt_config_set(&c, extra[k], "test"));
    dt_comm_options o = dt_comm_options_default();
    DT_ASSERT_OK(dt_comm_algo_parse(algorithm, &o.algorithm));
    DT_ASSERT_OK(dt_comm_set_options(world, &o));
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    const dt_status st = dt_trainer_run(t, NULL);
    dt_alloc_count_enable(0);
    DT_ASSERT_OK(st);
    long n = dt_alloc_count();
    printf("rank %d, %s%s%s%s%s%s: %ld allocations in steps 1..8 by our code, %ld inside "
           "MPI\n",
           rank, algorithm, tp ? ", tp 2" : "", pp ? ", pp 2 " : "", pp ? pp : "",
           extra != NULL ? ", " : "", extra != NULL ? extra[0] : "", n, dt_alloc_count_mpi());
    dt_trainer_free(t);
    return n;
}

static long steps_allocations(const char *algorithm, int tp, const char *pp)
{
    return steps_allocations_with(algorithm, tp, pp, NULL);
}

/* Each setting list in turn: no allocation from the second step on. */
static void check_settings(const char *const *const *lists, int n)
{
    for (int k = 0; k < n; k++) {
        long a = steps_allocations_with("ring", 0, NULL, lists[k]);
        if (a != 0)
            fprintf(stderr, "rank %d: %ld allocations in steps 1..8 with %s\n", rank, a,
                    lists[k][0]);
        assert_int_equal(a, 0);
    }
}

static void test_compressed_step_allocates_nothing(void **state)
{
    (void)state;
    static const char *const fp16[] = {"parallel.compress=fp16", NULL};
    static const char *const topk[] = {"parallel.compress=topk:0.1", NULL};
    static const char *const psgd[] = {"parallel.compress=powersgd:4", NULL};
    /* ZeRO-1's 16-bit reduce-scatter, its buffers planned at attach */
    static const char *const zero16[] = {"parallel.compress=bf16", "parallel.zero=1", NULL};
    static const char *const *const lists[] = {fp16, topk, psgd, zero16};
    check_settings(lists, 4);
}

/* ZeRO-3: every layer's gather and reduce-scatter in forward and backward, through the
 * window the model planned, with clipping over the slices and accumulation, and in 16 bits. */
static void test_zero3_step_allocates_nothing(void **state)
{
    (void)state;
    static const char *const plain[] = {"parallel.zero=3", NULL};
    static const char *const more[] = {"parallel.zero=3", "optim.clip_norm=0.5",
                                       "parallel.accumulation=2", NULL};
    /* the 16-bit reduce-scatters, their buffers planned at attach */
    static const char *const half[] = {"parallel.zero=3", "parallel.compress=fp16", NULL};
    static const char *const *const lists[] = {plain, more, half};
    check_settings(lists, 3);
    assert_int_equal(steps_allocations_with("mpi", 0, NULL, plain), 0);
    /* over tensor-parallel parts and pipeline stages (the slices of groups of one replica) */
    assert_int_equal(steps_allocations_with("ring", 1, NULL, plain), 0);
    assert_int_equal(steps_allocations_with("ring", 0, "1f1b", plain), 0);
}

static void test_ps_and_fedavg_steps_allocate_nothing(void **state)
{
    (void)state;
    /* 2 ranks: one worker and one server; fedavg: 2 of 4 clients per round, 2 local steps. */
    static const char *const ps0[] = {"parallel.strategy=ps", NULL};
    static const char *const ps2[] = {"parallel.strategy=ps", "parallel.staleness=2",
                                      "parallel.compress=topk:0.1", NULL};
    static const char *const ps_psgd[] = {"parallel.strategy=ps", "parallel.compress=powersgd:4",
                                          NULL};
    static const char *const fed[] = {
        "parallel.strategy=fedavg", "fedavg.clients=4", "fedavg.clients_per_round=2",
        "fedavg.local_steps=2",     "fedavg.rounds=8",  NULL};
    static const char *const fed_topk[] = {"parallel.strategy=fedavg",
                                           "fedavg.clients=4",
                                           "fedavg.clients_per_round=2",
                                           "fedavg.local_steps=2",
                                           "fedavg.rounds=8",
                                           "parallel.compress=topk:0.1",
                                           NULL};
    static const char *const fed_fp16[] = {"parallel.strategy=fedavg",
                                           "fedavg.clients=4",
                                           "fedavg.clients_per_round=2",
                                           "fedavg.local_steps=2",
                                           "fedavg.rounds=8",
                                           "parallel.compress=fp16",
                                           NULL};
    static const char *const *const lists[] = {ps0, ps2, ps_psgd, fed, fed_topk, fed_fp16};
    check_settings(lists, 6);
}

/* train.stop_signal: the ranks' agreement after every step (src/train/stop.c), a 4-byte
 * all-reduce from the request pool, under ddp and ps at staleness 0. */
static void test_stop_agreement_allocates_nothing(void **state)
{
    (void)state;
    static const char *const ddp[] = {"train.stop_signal=usr1", NULL};
    static const char *const ps0[] = {"train.stop_signal=usr2", "parallel.strategy=ps", NULL};
    static const char *const *const lists[] = {ddp, ps0};
    check_settings(lists, 2);
}

static void test_localsgd_step_allocates_nothing(void **state)
{
    (void)state;
    /* 8 steps: 2 synchronous, then local ones averaged after steps 5 and 8. */
    static const char *const ls[] = {"parallel.strategy=localsgd", "localsgd.sync_every=3",
                                     "localsgd.warmup=2", NULL};
    static const char *const *const lists[] = {ls};
    check_settings(lists, 1);
}

static void test_ring_step_allocates_nothing(void **state)
{
    (void)state;
    long n = steps_allocations("ring", 0, NULL);
    if (n != 0)
        fprintf(stderr, "rank %d: %ld allocations in steps 1..8 with the ring\n", rank, n);
    assert_int_equal(n, 0);
}

static void test_mpi_step_allocates_nothing_of_ours(void **state)
{
    (void)state;
    long n = steps_allocations("mpi", 0, NULL);
    assert_int_equal(n, 0); /* Open MPI's own (MPI_Iallreduce's temporary) are apart */
}

static void test_tp_step_allocates_nothing(void **state)
{
    (void)state;
    /* Tensor parallelism over the 2 ranks: sums, a gather, an input-gradient sum. */
    long n = steps_allocations("ring", 1, NULL);
    if (n != 0)
        fprintf(stderr, "rank %d: %ld allocations in steps 1..8 at tp 2\n", rank, n);
    assert_int_equal(n, 0);
}

static void test_pp_step_allocates_nothing(void **state)
{
    (void)state;
    /* A pipeline of 2 stages: activations and gradients as messages, slots in rows. */
    static const char *const schedules[] = {"gpipe", "1f1b"};
    for (int k = 0; k < 2; k++) {
        long n = steps_allocations("ring", 0, schedules[k]);
        if (n != 0)
            fprintf(stderr, "rank %d: %ld allocations in steps 1..8 at pp 2, %s\n", rank, n,
                    schedules[k]);
        assert_int_equal(n, 0);
    }
}

/* A GPT on text at tp 2, by heads and with sequence parallelism: the blocks' all-reduces, or
 * their all-gathers and reduce-scatters and the LayerNorms' gradient sums. */
static void test_gpt_tp_step_allocates_nothing(void **state)
{
    (void)state;
    static char files[600];
    char path[512], words[4096];
    /* rank 0's file, in rank 0's directory: the ranks' configs must agree */
    snprintf(path, sizeof path, "%s/gpt_alloc_corpus.txt", dt_test_tmpdir());
    if (rank == 0) {
        for (size_t i = 0; i < sizeof words; i++)
            words[i] = (char)('a' + (i * 7) % 26);
        assert_int_equal(dt_test_write_file(path, words, sizeof words), 0);
    }
    DT_ASSERT_OK(dt_comm_bcast(world, path, sizeof path, DT_COMM_UINT8, 0));
    snprintf(files, sizeof files, "data.text_files=%s", path);
    static const char *const heads[] = {
        "data.kind=text",
        files,
        "model.block_size=16",
        "model.layers=embedding 256 16, position, dropout 0.1, h: 2 x block 2 p=0.1 attn_p=0.1, "
        "layernorm, lm_head",
        "train.batch=4",
        "parallel.tp=2",
        "optim.kind=adamw",
        "optim.clip_norm=1",
        NULL};
    static const char *sequence[12];
    int k = 0;
    for (; heads[k] != NULL; k++)
        sequence[k] = heads[k];
    sequence[k] = "parallel.sequence_parallel=on";
    /* ZeRO-3 in place of tp: the tied head's table gathered as the embedding's is */
    static const char *zero3[12];
    for (int j = 0, n = 0; heads[j] != NULL; j++)
        zero3[n++] = strcmp(heads[j], "parallel.tp=2") == 0 ? "parallel.zero=3" : heads[j];
    static const char *const *const lists[] = {heads, sequence, zero3};
    check_settings(lists, 3);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_step_allocates_nothing),
        cmocka_unit_test(test_mpi_step_allocates_nothing_of_ours),
        cmocka_unit_test(test_tp_step_allocates_nothing),
        cmocka_unit_test(test_pp_step_allocates_nothing),
        cmocka_unit_test(test_compressed_step_allocates_nothing),
        cmocka_unit_test(test_zero3_step_allocates_nothing),
        cmocka_unit_test(test_ps_and_fedavg_steps_allocate_nothing),
        cmocka_unit_test(test_stop_agreement_allocates_nothing),
        cmocka_unit_test(test_localsgd_step_allocates_nothing),
        cmocka_unit_test(test_gpt_tp_step_allocates_nothing),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
