/* test_ckpt_mem.c — a checkpoint's save and load, and a weight file's, hold one tensor at a
 * time, not the model (issue 36; docs/checkpoint-format.md, "What a rank holds").
 *
 * A deep MLP of equal 128 x 128 layers, whose largest tensor is a small fraction of the
 * model (1/25 of the parameters, 1/75 of the state with Adam's two moments), trained 2
 * steps under ddp, ZeRO-1, tp 2 and pp 2 on 2 ranks, then saved and loaded back with every
 * allocation counted in bytes (tests/support/alloc_count.c: the blocks in flight, Open
 * MPI's own apart). On every rank the peak extra memory of the save and of the load must
 * stay under 3 x the largest whole tensor (the tensor gathered, its tp part, and the tp
 * gather's own room) + 64 KiB (the reader's checksum buffer, the config's text) + 2 KiB
 * per tensor of the set (its entry in the part's header, as written and as parsed): about
 * a ninth of the model's state. A save or load that gathers or reads a whole buffer again
 * (or builds the whole model under a pipeline to count its tensors) fails here, naming the
 * layout, the phase, the peak and the bound. The load must also give back exactly the
 * parameters saved.
 *
 * The same for the weight file (dt_trainer_save_weights, dt_trainer_load_weights: what
 * --save-weights and --init-weights run) under pp 2 (contiguous and round robin) and tp 2,
 * the bound's tensors the model's parameter tensors, about a fifth of the parameters: the
 * file must also hold the bytes dt_weights_write writes from the whole buffer. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"

#define HIDDEN_LAYERS 24
#define WIDTH "128"
#define FIXED_BYTES (64LL << 10)     /* the reader's checksum buffer, the config's text */
#define PER_TENSOR_BYTES (2LL << 10) /* a tensor's entry in the part's header and tables */

static int rank, size;
static dt_comm *world;

static dt_config deep_config(const char *layout)
{
    dt_config c = dt_config_default();
    char layers[1024] = "model.layers=";
    for (int l = 0; l < HIDDEN_LAYERS; l++)
        strcat(layers, "linear " WIDTH ", relu, ");
    strcat(layers, "linear 4");
    dt_test_set(&c, "data.kind=synthetic");
    dt_test_set(&c, "data.synth_samples=256");
    dt_test_set(&c, "data.test_samples=16");
    dt_test_set(&c, "data.synth_features=" WIDTH);
    dt_test_set(&c, "data.synth_targets=4");
    dt_test_set(&c, layers);
    dt_test_set(&c, "loss.kind=mse");
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.threads=1");
    dt_test_set(&c, "train.batch=16");
    dt_test_set(&c, "train.max_steps=2");
    dt_test_set(&c, "optim.kind=adam");
    dt_test_set(&c, "optim.lr=0.001");
    /* The layout: settings apart by spaces. */
    char copy[256], *save = NULL;
    snprintf(copy, sizeof copy, "%s", layout);
    for (char *kv = strtok_r(copy, " ", &save); kv != NULL; kv = strtok_r(NULL, " ", &save))
        dt_test_set(&c, kv);
    if (strstr(layout, "parallel.tp=") != NULL) /* every linear layer split */
        dt_test_set(&c, "parallel.tp_min_weights=0");
    return c;
}

/* The largest whole tensor's bytes, and the model's (whole) parameter bytes. */
static void sizes(dt_model *m, long long *largest, long long *params)
{
    *largest = 0;
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const long long b = (long long)dt_model_tensor(m, i)->whole_count * 4;
        *largest = b > *largest ? b : *largest;
    }
    *params = (long long)dt_model_whole_param_count(m) * 4;
}

/* Every rank's peak under the bound; prints each failing rank's numbers. */
static int within(const char *layout, const char *phase, long long peak, long long bound,
                  long long state)
{
    const int ok = peak <= bound && !dt_alloc_count_overflow();
    if (!ok)
        fprintf(stderr,
                "%s: rank %d: %s held %lld bytes at its peak; expected at most %lld (3 x the "
                "largest tensor + %lld + %lld per tensor); the model's state is %lld bytes%s\n",
                layout, rank, phase, peak, bound, FIXED_BYTES, PER_TENSOR_BYTES, state,
                dt_alloc_count_overflow() ? " (too many blocks to track)" : "");
    else if (rank == 0)
        printf("%s: %s peak %lld bytes (bound %lld, state %lld)\n", layout, phase, peak, bound,
               state);
    int all = ok;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

static void save_and_load(const char *layout, const char *sub)
{
    char root[256];
    if (rank == 0)
        snprintf(root, sizeof root, "%s/%s", dt_test_tmpdir(), sub);
    MPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
    dt_config c = deep_config(layout);
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    dt_model *m = dt_trainer_model(t);
    long long largest = 0, params = 0;
    sizes(m, &largest, &params);
    const long long tensors = 3LL * dt_model_tensor_count(m); /* parameters, Adam's moments */
    const long long bound = 3 * largest + FIXED_BYTES + PER_TENSOR_BYTES * tensors;
    const long long state = 3 * params;

    dt_ckpt_info info;
    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    const dt_status saved = dt_trainer_save_checkpoint(t, root, 1, 0, 0, &info);
    dt_alloc_count_enable(0);
    const long long save_peak = dt_alloc_count_peak_bytes();
    DT_ASSERT_OK(saved);

    /* The parameters saved, then scrambled, then loaded back. */
    const size_t n = dt_model_param_count(m);
    float *before = malloc(n * sizeof(float));
    assert_non_null(before);
    memcpy(before, dt_model_params(m), n * sizeof(float));
    memset(dt_model_params(m), 0, n * sizeof(float));
    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    const dt_status loaded = dt_trainer_load_checkpoint(t, info.dir);
    dt_alloc_count_enable(0);
    const long long load_peak = dt_alloc_count_peak_bytes();
    DT_ASSERT_OK(loaded);
    const int same = memcmp(before, dt_model_params(m), n * sizeof(float)) == 0;
    if (!same)
        fprintf(stderr, "%s: rank %d: the parameters loaded differ from those saved\n", layout,
                rank);
    free(before);
    dt_trainer_free(t);

    const int save_ok = within(layout, "save", save_peak, bound, state);
    const int load_ok = within(layout, "load", load_peak, bound, state);
    assert_true(same);
    assert_true(save_ok);
    assert_true(load_ok);
}

/* Rank 0: whether files a and b hold the same bytes, the difference said. */
static int same_file(const char *layout, const char *a, const char *b)
{
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    DT_ASSERT_OK(dt_read_file(a, "test", &x, &nx));
    DT_ASSERT_OK(dt_read_file(b, "test", &y, &ny));
    size_t at = 0;
    while (at < nx && at < ny && x[at] == y[at])
        at++;
    const int same = nx == ny && at == nx;
    if (!same)
        fprintf(stderr,
                "%s: the streamed weight file %s (%zu bytes) differs from dt_weights_write's %s "
                "(%zu bytes) from byte %zu\n",
                layout, a, nx, b, ny, at);
    dt_free(x);
    dt_free(y);
    return same;
}

static void weights_save_and_load(const char *layout, const char *name)
{
    char path[256], ref[300];
    if (rank == 0)
        snprintf(path, sizeof path, "%s/%s.safetensors", dt_test_tmpdir(), name);
    MPI_Bcast(path, (int)sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(ref, sizeof ref, "%s.ref", path);
    dt_config c = deep_config(layout);
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    dt_model *m = dt_trainer_model(t);

    /* The whole model's description is made in the save, and counted with it. */
    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    const dt_status saved = dt_trainer_save_weights(t, path, 0.0, 1.0);
    dt_alloc_count_enable(0);
    const long long save_peak = dt_alloc_count_peak_bytes();
    DT_ASSERT_OK(saved);
    const dt_model *wm = NULL;
    DT_ASSERT_OK(dt_trainer_whole_model(t, &wm));
    long long largest = 0, params = 0;
    sizes((dt_model *)wm, &largest, &params);
    const long long bound =
        3 * largest + FIXED_BYTES + PER_TENSOR_BYTES * dt_model_tensor_count(wm);

    /* The file dt_weights_write writes from the whole buffer (the save before issue 36's
     * streaming), byte for byte. */
    const float *whole = NULL;
    DT_ASSERT_OK(dt_trainer_whole_params(t, &whole));
    int same_bytes = 1;
    if (rank == 0) {
        DT_ASSERT_OK(dt_weights_write(wm, whole, ref, 0.0, 1.0));
        same_bytes = same_file(layout, path, ref);
    }
    MPI_Bcast(&same_bytes, 1, MPI_INT, 0, MPI_COMM_WORLD);

    const size_t n = dt_model_param_count(m);
    float *before = malloc(n * sizeof(float));
    assert_non_null(before);
    memcpy(before, dt_model_params(m), n * sizeof(float));
    memset(dt_model_params(m), 0, n * sizeof(float));
    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    const dt_status loaded = dt_trainer_load_weights(t, path);
    dt_alloc_count_enable(0);
    const long long load_peak = dt_alloc_count_peak_bytes();
    DT_ASSERT_OK(loaded);
    const int same = memcmp(before, dt_model_params(m), n * sizeof(float)) == 0;
    if (!same)
        fprintf(stderr, "%s: rank %d: the parameters loaded differ from those saved\n", layout,
                rank);
    free(before);
    dt_trainer_free(t);

    const int save_ok = within(layout, "weights save", save_peak, bound, params);
    const int load_ok = within(layout, "weights load", load_peak, bound, params);
    assert_true(same_bytes);
    assert_true(same);
    assert_true(save_ok);
    assert_true(load_ok);
}

static void test_ddp(void **state)
{
    (void)state;
    save_and_load("parallel.dp=2", "mem-ddp");
}

static void test_zero(void **state)
{
    (void)state;
    save_and_load("parallel.zero=1", "mem-zero");
}

static void test_tp(void **state)
{
    (void)state;
    save_and_load("parallel.tp=2", "mem-tp");
}

static void test_pp(void **state)
{
    (void)state;
    save_and_load("parallel.pp=2", "mem-pp");
}

static void test_weights_pp(void **state)
{
    (void)state;
    weights_save_and_load("parallel.pp=2", "w-pp");
    weights_save_and_load("parallel.pp=2 parallel.pp_split=round_robin", "w-pp-rr");
}

static void test_weights_tp(void **state)
{
    (void)state;
    weights_save_and_load("parallel.tp=2", "w-tp");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp),        cmocka_unit_test(test_zero),
        cmocka_unit_test(test_tp),         cmocka_unit_test(test_pp),
        cmocka_unit_test(test_weights_pp), cmocka_unit_test(test_weights_tp),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
