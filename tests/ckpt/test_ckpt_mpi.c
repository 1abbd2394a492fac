/* test_ckpt_mpi.c — the non-finite guard and dtrain export, on 1 to 3 ranks.
 *
 * Non-finite: a NaN put into one rank's loss gradient (dt_trainer_inject_nonfinite) must
 * make every rank skip that step together: the same count of skipped steps everywhere, the
 * replicas' parameters bitwise identical and finite afterwards, and the optimizer one
 * step behind the steps attempted. Under ZeRO-1 too, where each rank holds a slice.
 *
 * Export: the MLP from PyTorch's initial weights trained 20 Adam steps (as
 * tests/e2e/mlp_nodrop.ini), checkpointed (under tensor parallelism on 2 ranks), exported
 * with dt_ckpt_export, loaded as a weights file and run on 16 training images must give
 * PyTorch's outputs after the same run (tests/ckpt/export_ref.safetensors, made by
 * tests/ckpt/gen_export_ref.py), and exporting twice must give the same bytes. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/checkpoint.h"
#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"

static int rank, size;
static dt_comm *world;

static dt_config mlp_config(void)
{
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_load(dt_test_src_path("tests/e2e/mlp_nodrop.ini"), &c));
    dt_test_set(&c, "train.threads=1");
    dt_test_set(&c, "parallel.global_batch=64");
    return c;
}

/* Every rank's whole parameter buffer is rank 0's, bit for bit, and finite. */
static void check_replicas(dt_trainer *t, const char *what)
{
    dt_model *m = dt_trainer_model(t);
    const size_t n = dt_model_param_count(m);
    const float *p = dt_model_params(m);
    float *all = malloc(n * sizeof(float) * (size_t)size);
    assert_non_null(all);
    MPI_Allgather(p, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    for (int r = 1; r < size; r++)
        if (memcmp(all, all + (size_t)r * n, n * sizeof(float)) != 0) {
            fprintf(stderr, "%s: rank %d's parameters differ from rank 0's\n", what, r);
            fail();
        }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) {
            fprintf(stderr, "%s: parameter %zu is %g after the skipped step\n", what, i, p[i]);
            fail();
        }
    free(all);
}

static void nonfinite_skip(int zero)
{
    dt_config c = mlp_config();
    dt_test_set(&c, "train.max_steps=4");
    dt_test_set_int(&c, "parallel.zero", zero && size > 1);
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    if (rank == size - 1)
        dt_trainer_inject_nonfinite(t, 3);
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    dt_train_comm_stats cs;
    dt_trainer_comm_stats(t, &cs);
    if (dt_trainer_skipped_steps(t) != 1 || cs.optim_steps != 4) {
        fprintf(stderr, "rank %d: skipped %lld steps (expected 1), took %lld (expected 4)\n", rank,
                (long long)dt_trainer_skipped_steps(t), (long long)cs.optim_steps);
        fail();
    }
    check_replicas(t, zero ? "ZeRO-1" : "ddp");
    dt_trainer_free(t);
}

static void test_nonfinite_skip(void **state)
{
    (void)state;
    nonfinite_skip(0);
}

static void test_nonfinite_skip_zero(void **state)
{
    (void)state;
    nonfinite_skip(1);
}

/* --on-nonfinite stop: every rank fails in the same step, naming the rank. */
static void test_nonfinite_stop(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "train.max_steps=4");
    dt_test_set(&c, "train.on_nonfinite=stop");
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    if (rank == size - 1)
        dt_trainer_inject_nonfinite(t, 2);
    DT_ASSERT_STATUS(dt_trainer_run(t, NULL), DT_ERR_NONFINITE);
    char want[64];
    snprintf(want, sizeof want, "on rank %d", size - 1);
    DT_ASSERT_ERROR_HAS("step 2");
    DT_ASSERT_ERROR_HAS(want);
    dt_trainer_free(t);
}

static void read_bytes(const char *path, char **buf, size_t *n)
{
    DT_ASSERT_OK(dt_read_file(path, "test", buf, n));
}

/* Rank 0: the exported file run on the probe images against PyTorch's outputs. */
static void check_export_outputs(dt_trainer *t, const char *file)
{
    dt_st_file *ref = NULL;
    DT_ASSERT_OK(dt_st_open(dt_test_src_path("tests/ckpt/export_ref.safetensors"), &ref));
    const dt_st_tensor *out = dt_st_find(ref, "outputs");
    assert_non_null(out);
    const int64_t probe = out->shape[0], width = out->shape[1];
    dt_config c = mlp_config();
    dt_model *m = NULL;
    const dt_dataset *train = dt_trainer_train_set(t);
    DT_ASSERT_OK(dt_model_create(c.layers, c.nlayers, &train->sample_shape, probe, &m));
    DT_ASSERT_OK(dt_weights_load(m, file));
    int64_t idx[64];
    for (int64_t i = 0; i < probe; i++)
        idx[i] = i;
    dt_dataset_gather(train, idx, probe, dt_model_input(m), NULL, NULL);
    const dt_forward_ctx fwd = {.train = 0};
    DT_ASSERT_OK(dt_model_forward(m, probe, &fwd));
    double *got = malloc(sizeof(double) * (size_t)(probe * width)), want[64 * 16];
    assert_non_null(got);
    for (int64_t i = 0; i < probe * width; i++)
        got[i] = dt_model_output(m)[i];
    memcpy(want, out->data, sizeof(double) * (size_t)(probe * width));
    /* 20 Adam steps in two summation orders: test_e2e's 1e-4 (relative, on the losses)
     * covers the outputs too; an exported tensor in the wrong place or layout moves them by
     * more than 1e-1. */
    DT_ASSERT_CLOSE_D("exported model's outputs", got, want, (size_t)(probe * width), 1e-4, 1e-4);
    free(got);
    dt_model_free(m);
    dt_st_close(ref);
}

static void test_export_matches_pytorch(void **state)
{
    (void)state;
    char root[256], file[300], again[300], set[400];
    /* One directory for the job: rank 0 names it, every rank writes there. */
    if (rank == 0)
        snprintf(root, sizeof root, "%s/export", dt_test_tmpdir());
    MPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
    dt_config c = mlp_config();
    snprintf(c.checkpoint.dir, sizeof c.checkpoint.dir, "%s", root);
    if (size == 2)
        dt_test_set(&c, "parallel.tp=2");
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    DT_ASSERT_OK(dt_trainer_load_weights(t, dt_test_src_path("tests/e2e/mlp_init.safetensors")));
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    if (rank == 0) {
        snprintf(set, sizeof set, "%s/step-000000020", root);
        snprintf(file, sizeof file, "%s/export.safetensors", root);
        snprintf(again, sizeof again, "%s/export-again.safetensors", root);
        DT_ASSERT_OK(dt_ckpt_export(set, file));
        /* The directory's newest set is the same one. */
        char newest[400];
        dt_ckpt_manifest m;
        int found = 0;
        DT_ASSERT_OK(dt_ckpt_find(root, newest, sizeof newest, &m, &found, NULL, NULL));
        assert_true(found && m.step == 20);
        DT_ASSERT_OK(dt_ckpt_export(newest, again));
        char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        read_bytes(file, &a, &na);
        read_bytes(again, &b, &nb);
        if (na != nb || memcmp(a, b, na) != 0) {
            fprintf(stderr, "two exports of the same set differ (%zu and %zu bytes)\n", na, nb);
            fail();
        }
        free(a);
        free(b);
        check_export_outputs(t, file);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dt_test_tmpdir());
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dt_test_tmpdir());
    }
    dt_trainer_free(t);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonfinite_skip),
        cmocka_unit_test(test_nonfinite_skip_zero),
        cmocka_unit_test(test_nonfinite_stop),
        cmocka_unit_test(test_export_matches_pytorch),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
