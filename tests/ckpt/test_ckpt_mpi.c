/* test_ckpt_mpi.c — the non-finite guard and dtrain export, on 1 to 3 ranks.
 *
 * Non-finite: a NaN put into one rank's loss gradient (dt_trainer_inject_nonfinite) must
 * make every rank skip that step together: the same count of skipped steps everywhere, the
 * replicas' parameters bitwise identical and finite afterwards, and the optimizer one
 * step behind the steps attempted. Under ZeRO-1 and ZeRO-3 too, where each rank holds a slice
 * (ZeRO-3 scans each layer's gradients before their reduce-scatter).
 * train.skip_limit: weights that overflowed (learning rate 1e30) fail every later step, and
 * the limit-th such step in a row ends the run on every rank, naming the limit, with the
 * limit - 1 steps before it skipped; a step taken between two skips starts the count again.
 *
 * Export: the MLP from PyTorch's initial weights trained 20 Adam steps (as
 * tests/e2e/mlp_nodrop.ini), checkpointed (under tensor parallelism on 2 ranks), exported
 * with dt_ckpt_export, loaded as a weights file and run on 16 training images must give
 * PyTorch's outputs after the same run (tests/ckpt/export_ref.safetensors, made by
 * tests/ckpt/gen_export_ref.py), and exporting twice must give the same bytes.
 *
 * Residuals resharded (docs/checkpoint-format.md, docs/COMPRESSION.md): a set holding two
 * replicas' top-k residuals written here by hand (replica 0: i + 1 in every element of
 * tensor i, replica 1: 5 (i + 1)) loaded on 1 to 3 ranks. On 2 each rank takes its own;
 * on 1 or 3 each takes an equal share of the saved sum (6 (i + 1) / ranks), so that the
 * residuals summed over the ranks are what the set holds, what the replicas still owe the
 * parameters. rtol 1e-6. (One rank keeps no residual: nothing is exchanged.) */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrain/checkpoint.h"
#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"
#include "train/trainer_internal.h"

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

/* Every rank's whole parameter buffer is rank 0's, bit for bit, and finite (under ZeRO-3
 * gathered from the slices: then equal by construction, and checked finite). */
static void check_replicas(dt_trainer *t, const char *what)
{
    dt_model *m = dt_trainer_model(t);
    const size_t n = dt_model_param_count(m);
    const float *p = NULL;
    DT_ASSERT_OK(dt_trainer_whole_params(t, &p));
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

/* zero: the ZeRO stage (ZeRO-1 on 2 ranks or more; ZeRO-3 on any). */
static int zero_at(int zero)
{
    return zero == 3 || size > 1 ? zero : 0;
}

static void nonfinite_skip(int zero)
{
    dt_config c = mlp_config();
    dt_test_set(&c, "train.max_steps=4");
    dt_test_set_int(&c, "parallel.zero", zero_at(zero));
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
    check_replicas(t, zero == 3 ? "ZeRO-3" : zero ? "ZeRO-1" : "ddp");
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
    nonfinite_skip(3);
}

/* --on-nonfinite stop: every rank fails in the same step, naming the rank; with NaNs on
 * several ranks (every rank but 0, at 3 ranks), the lowest of them and how many. */
static void nonfinite_stop(int zero)
{
    dt_config c = mlp_config();
    dt_test_set(&c, "train.max_steps=4");
    dt_test_set(&c, "train.on_nonfinite=stop");
    dt_test_set_int(&c, "parallel.zero", zero_at(zero));
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    const int first = size > 2 ? 1 : size - 1;
    if (rank >= first)
        dt_trainer_inject_nonfinite(t, 2);
    DT_ASSERT_STATUS(dt_trainer_run(t, NULL), DT_ERR_NONFINITE);
    char want[64];
    snprintf(want, sizeof want, "on rank %d (%d rank%s in all)", first, size - first,
             size - first > 1 ? "s" : "");
    DT_ASSERT_ERROR_HAS("step 2");
    DT_ASSERT_ERROR_HAS(want);
    dt_trainer_free(t);
}

/* Under ZeRO-3 each layer's gradients are scanned before their reduce-scatter (zero3.c). */
static void test_nonfinite_stop(void **state)
{
    (void)state;
    nonfinite_stop(0);
    nonfinite_stop(3);
}

/* Every rank stops at the same step: the first update (learning rate 1e30) sends the
 * weights past float's range, so steps 2, 3, ... each give a NaN. */
static void test_skip_limit(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "train.max_steps=30");
    dt_test_set(&c, "train.epochs=0");
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=1e30");
    dt_test_set(&c, "schedule.kind=constant");
    dt_test_set(&c, "schedule.warmup_steps=0");
    dt_test_set(&c, "train.skip_limit=4");
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    DT_ASSERT_STATUS(dt_trainer_run(t, NULL), DT_ERR_NONFINITE);
    DT_ASSERT_ERROR_HAS("step 5: 4 steps in a row with a NaN or Inf, the limit");
    if (dt_trainer_skipped_steps(t) != 3 || dt_trainer_optim_steps(t) != 1) {
        fprintf(stderr, "rank %d: skipped %lld steps (expected 3), took %lld (expected 1)\n", rank,
                (long long)dt_trainer_skipped_steps(t), (long long)dt_trainer_optim_steps(t));
        fail();
    }
    dt_trainer_free(t);
}

/* NaNs at steps 2 and 4 with a limit of 2: step 3 is taken between them, so the run ends
 * normally with both skipped. */
typedef struct again_ctx {
    dt_trainer *t;
    int64_t at;
} again_ctx;

static dt_status inject_again(void *vctx, const dt_step_info *s)
{
    again_ctx *a = vctx;
    if (s->skipped && a->at > 0) {
        dt_trainer_inject_nonfinite(a->t, a->at);
        a->at = 0;
    }
    return DT_OK;
}

static void test_skip_limit_resets(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "train.max_steps=4");
    dt_test_set(&c, "train.skip_limit=2");
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    again_ctx a = {t, rank == 0 ? 4 : 0};
    if (rank == 0)
        dt_trainer_inject_nonfinite(t, 2);
    dt_train_callbacks cb = {.ctx = &a, .on_step = inject_again};
    DT_ASSERT_OK(dt_trainer_run(t, &cb));
    if (dt_trainer_skipped_steps(t) != 2 || dt_trainer_optim_steps(t) != 4) {
        fprintf(stderr, "rank %d: skipped %lld steps (expected 2), took %lld (expected 4)\n", rank,
                (long long)dt_trainer_skipped_steps(t), (long long)dt_trainer_optim_steps(t));
        fail();
    }
    check_replicas(t, "skip limit");
    dt_trainer_free(t);
}

/* ps (3 ranks: workers 0 and 1, server 2): worker 1's pushes hold a NaN from step 2 on, so
 * at train.skip_limit 3 its run fails alone at step 4. It tells its server (a LEAVE), which
 * tells worker 0 at its next pull: every rank's run returns, the two others naming worker
 * 1, where they used to wait for the watchdog (here 20 s: a wait that long fails the test
 * with DT_ERR_TIMEOUT). A program using the library has no MPI_Abort to end them. */
static dt_status poison_next(void *vctx, const dt_step_info *s)
{
    (void)s;
    dt_trainer *t = vctx;
    dt_trainer_inject_nonfinite(t, t->attempted + 1);
    return DT_OK;
}

static void test_ps_worker_leaves(void **state)
{
    (void)state;
    if (size != 3)
        skip(); /* two workers and a server */
    dt_config c = mlp_config();
    dt_test_set(&c, "parallel.strategy=ps");
    dt_test_set(&c, "parallel.servers=1");
    dt_test_set(&c, "train.max_steps=12");
    dt_test_set(&c, "train.skip_limit=3");
    dt_test_set(&c, "comm.timeout=20");
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    dt_train_callbacks cb = {.ctx = t, .on_step = poison_next};
    if (rank == 1)
        dt_trainer_inject_nonfinite(t, 2);
    const double t0 = MPI_Wtime();
    const dt_status st = dt_trainer_run(t, rank == 1 ? &cb : NULL);
    const double took = MPI_Wtime() - t0;
    if (rank == 1) {
        DT_ASSERT_STATUS(st, DT_ERR_NONFINITE);
        DT_ASSERT_ERROR_HAS("step 4: 3 steps in a row with a NaN or Inf on this rank");
    } else {
        DT_ASSERT_STATUS(st, DT_ERR_MISMATCH);
        DT_ASSERT_ERROR_HAS("worker rank 1 left");
        DT_ASSERT_ERROR_HAS(rank == 2 ? "left the run at its step 4" : "ended the run");
    }
    if (dt_trainer_ended_by_peer(t) != (rank != 1)) {
        fprintf(stderr, "rank %d: dt_trainer_ended_by_peer %d, expected %d\n", rank,
                dt_trainer_ended_by_peer(t), rank != 1);
        fail();
    }
    if (took > 10.0) {
        fprintf(stderr, "rank %d: the run took %.1f s to fail (the watchdog's wait?)\n", rank,
                took);
        fail();
    }
    dt_trainer_free(t);
}

/* dt_trainer_request_stop from a callback after step 3, on the last rank only. */
static dt_status ask_stop(void *vctx, const dt_step_info *s)
{
    if (s->step == 3 && rank == size - 1)
        dt_trainer_request_stop((dt_trainer *)vctx);
    return DT_OK;
}

/* train.stop_signal: a stop asked of one rank stops every rank after the same step (one
 * later than asked on several ranks: the ranks agree a step late), dt_trainer_run returns
 * DT_OK, the replicas are equal; without the setting the request changes nothing. */
static void stop_run(int agree, int zero)
{
    dt_config c = mlp_config();
    dt_test_set(&c, "train.max_steps=8");
    dt_test_set_int(&c, "parallel.zero", zero_at(zero));
    if (agree)
        dt_test_set(&c, "train.stop_signal=usr1");
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    dt_train_callbacks cb = {.ctx = t, .on_step = ask_stop};
    DT_ASSERT_OK(dt_trainer_run(t, &cb));
    const int64_t want = !agree ? -1 : size == 1 ? 3 : 4;
    const int64_t steps = dt_trainer_optim_steps(t);
    if (dt_trainer_stopped_at(t) != want || steps != (agree ? want : 8)) {
        fprintf(stderr,
                "rank %d (stop_signal %s, zero %d): stopped at %lld after %lld steps, "
                "expected %lld\n",
                rank, agree ? "usr1" : "none", zero, (long long)dt_trainer_stopped_at(t),
                (long long)steps, (long long)want);
        fail();
    }
    check_replicas(t, "stopped run");
    dt_trainer_free(t);
}

static void test_stop_request(void **state)
{
    (void)state;
    stop_run(1, 0);
    stop_run(1, 1);
    stop_run(1, 3);
    stop_run(0, 0);
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

/* Replica r's hand-written residual value in tensor i. */
static float saved_resid(int r, int i)
{
    return (float)((r == 0 ? 1 : 5) * (i + 1));
}

/* Rank 0: the set in `from` (every parameter and state tensor, its config) rewritten into
 * `to` (a step directory made in `root`) as a set of 2 replicas whose residuals are
 * saved_resid's. Returns 1 on success, printing what failed otherwise: the ranks agree on
 * it before they load (a failed assert here would leave the others waiting). */
static int write_two_replica_set(const dt_model *m, const char *from, const char *root,
                                 const char *to)
{
    dt_ckpt_set *a = NULL;
    if (dt_ckpt_open(from, &a) != DT_OK) {
        fprintf(stderr, "cannot open %s: %s\n", from, dt_last_error());
        return 0;
    }
    const int nt = dt_model_tensor_count(m), held = dt_ckpt_set_count(a);
    dt_st_tensor *ts = calloc((size_t)(held + 2 * nt), sizeof *ts);
    char(*names)[192] = calloc((size_t)(2 * nt), sizeof *names);
    float **vals = calloc((size_t)(2 * nt), sizeof *vals);
    int n = 0, ok = ts != NULL && names != NULL && vals != NULL;
    for (int i = 0; ok && i < held; i++)
        if (strncmp(dt_ckpt_set_get(a, i)->name, DT_CKPT_COMPRESS_PREFIX,
                    strlen(DT_CKPT_COMPRESS_PREFIX)) != 0)
            ts[n++] = *dt_ckpt_set_get(a, i);
    for (int r = 0; ok && r < 2; r++)
        for (int i = 0; ok && i < nt; i++) {
            const dt_param_info *p = dt_model_tensor(m, i);
            const int k = r * nt + i;
            vals[k] = malloc(p->whole_count * sizeof(float));
            ok = vals[k] != NULL;
            for (size_t e = 0; ok && e < p->whole_count; e++)
                vals[k][e] = saved_resid(r, i);
            snprintf(names[k], sizeof names[k], DT_CKPT_COMPRESS_PREFIX "residual.%d.%s", r,
                     p->name);
            ts[n] = (dt_st_tensor){.name = names[k],
                                   .dtype = DT_ST_F32,
                                   .ndim = p->ndim,
                                   .data = vals[k],
                                   .nbytes = p->whole_count * sizeof(float)};
            for (int d = 0; d < p->ndim; d++)
                ts[n].shape[d] = p->whole_shape[d];
            n++;
        }
    /* The manifest: the first set's, with 2 replicas, its config.ini and the new part. */
    dt_ckpt_manifest man = *dt_ckpt_set_manifest(a);
    char src[600], dst[600];
    snprintf(src, sizeof src, "%s/%s", from, DT_CKPT_CONFIG);
    snprintf(dst, sizeof dst, "%s/%s", to, DT_CKPT_CONFIG);
    char *text = NULL;
    size_t nbytes = 0;
    const char *const meta[] = {"format", "pt", "producer", "dtrain"};
    dt_ckpt_file part = {0};
    if (ok && (mkdir(root, 0777) != 0 || mkdir(to, 0777) != 0)) {
        fprintf(stderr, "cannot create %s\n", to);
        ok = 0;
    }
    if (ok && (dt_read_file(src, "config", &text, &nbytes) != DT_OK ||
               dt_test_write_file(dst, text, nbytes) != 0)) {
        fprintf(stderr, "cannot copy %s to %s: %s\n", src, dst, dt_last_error());
        ok = 0;
    }
    if (ok && dt_ckpt_write_part(to, "part-00000.safetensors", ts, n, meta, 2, &part) != DT_OK) {
        fprintf(stderr, "cannot write the part in %s: %s\n", to, dt_last_error());
        ok = 0;
    }
    int cfg = -1;
    for (int f = 0; f < man.nfiles; f++)
        if (strcmp(man.files[f].name, DT_CKPT_CONFIG) == 0)
            cfg = f;
    if (ok && cfg < 0) {
        fprintf(stderr, "%s's manifest lists no %s\n", from, DT_CKPT_CONFIG);
        ok = 0;
    }
    if (ok) {
        man.dp = 2;
        man.files[0] = man.files[cfg];
        man.files[1] = part;
        man.nfiles = 2;
        if (dt_ckpt_manifest_write(to, &man) != DT_OK) {
            fprintf(stderr, "cannot write the manifest in %s: %s\n", to, dt_last_error());
            ok = 0;
        }
    }
    for (int k = 0; vals != NULL && k < 2 * nt; k++)
        free(vals[k]);
    free(vals);
    free(names);
    free(ts);
    dt_free(text);
    dt_ckpt_close(a);
    return ok;
}

static void test_residuals_resharded(void **state)
{
    (void)state;
    if (size == 1)
        skip(); /* one rank compresses nothing and keeps no residual */
    char root[256], from[400], to_root[300], to[330];
    if (rank == 0)
        snprintf(root, sizeof root, "%s/reshard", dt_test_tmpdir());
    MPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(to_root, sizeof to_root, "%s/two", root);
    snprintf(to, sizeof to, "%s/step-000000000", to_root);
    dt_config c = mlp_config();
    dt_test_set(&c, "parallel.compress=topk:0.1");
    /* A set of this run at step 0 (its model, optimizer, seed and batch), on this many
     * ranks; rank 0 makes the 2-replica set from it. */
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    dt_ckpt_info info;
    DT_ASSERT_OK(dt_trainer_save_checkpoint(t, root, 1, 0, 0, &info));
    snprintf(from, sizeof from, "%s", info.dir);
    int ok = rank == 0 ? write_two_replica_set(dt_trainer_model(t), from, to_root, to) : 1;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    dt_trainer_free(t);
    assert_true(ok);

    t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    DT_ASSERT_OK(dt_trainer_load_checkpoint(t, to));
    dt_comp_state cs;
    dt_strategy_comp_state(t->strategy, &cs);
    dt_model *m = dt_trainer_model(t);
    const size_t n = dt_model_param_count(m);
    assert_non_null(cs.resid);
    assert_int_equal(cs.count, n);
    double *want = malloc(n * sizeof(double)), *held = malloc(n * sizeof(double));
    float *sum = malloc(n * sizeof(float));
    assert_true(want != NULL && held != NULL && sum != NULL);
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        const double total = (double)saved_resid(0, i) + saved_resid(1, i);
        for (size_t k = 0; k < p->count; k++) {
            want[p->offset + k] = size == 2 ? saved_resid(rank, i) : total / size;
            held[p->offset + k] = total;
        }
    }
    char name[128];
    snprintf(name, sizeof name, "rank %d of %d: its residual from 2 saved replicas", rank, size);
    const int mine_ok = dt_check_close_f(name, cs.resid, want, n, 0.0, 1e-6);
    MPI_Allreduce(cs.resid, sum, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const int sum_ok = dt_check_close_f("the residuals summed over the ranks (vs the set's sum)",
                                        sum, held, n, 0.0, 1e-6);
    free(want);
    free(held);
    free(sum);
    dt_trainer_free(t);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", root);
    }
    assert_true(mine_ok);
    assert_true(sum_ok);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonfinite_skip),         cmocka_unit_test(test_nonfinite_skip_zero),
        cmocka_unit_test(test_nonfinite_stop),         cmocka_unit_test(test_residuals_resharded),
        cmocka_unit_test(test_export_matches_pytorch), cmocka_unit_test(test_skip_limit),
        cmocka_unit_test(test_skip_limit_resets),      cmocka_unit_test(test_ps_worker_leaves),
        cmocka_unit_test(test_stop_request),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
