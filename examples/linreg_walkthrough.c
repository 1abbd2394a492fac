/* linreg_walkthrough.c — the linear regression this project follows (y = W x + b, W of
 * q x p, trained on the mean squared error), trained four ways on dtrain's public API:
 *
 *     linreg_walkthrough single                          one process, no MPI
 *     mpirun -np 2 linreg_walkthrough dp                 each batch split in two chunks
 *     mpirun -np 2 linreg_walkthrough tp                 W's rows split over two ranks
 *     mpirun -np 4 --oversubscribe linreg_walkthrough dptp    both: dp 2 x tp 2
 *
 * (dp takes any world of 2 or more ranks, tp 2 to q ranks, dptp an even world of 4 or
 * more.) Every layout takes the same steps on the same global batch of train.batch
 * samples, so the four should end at the same parameters up to rounding. The program
 * prints which slice of W and b each rank holds, the bytes each step communicated, the
 * final training MSE, the least-squares MSE on the same samples (the normal equations,
 * solved here), the gap between the two and the distance between the parameters.
 * docs/TENSOR_PARALLEL.md walks through the formulas and the code behind each line.
 *
 * Usage: linreg_walkthrough MODE [CONFIG] [--params] [section.key=value ...]
 *   CONFIG     a config file (default examples/linreg.ini); it must describe one linear
 *              layer on regression targets with the MSE loss
 *   --params   also print the final parameters [W b] (for comparing layouts)
 *   key=value  config overrides, as dtrain's --set
 *
 * Builds against an installed dtrain with
 *     mpicc -std=c11 linreg_walkthrough.c -ldtrain -lm -o linreg_walkthrough
 * (tests/examples/walkthrough.cmake builds it against include/ and the shared library).
 * Exits 0 on success, 1 when training fails (the job is ended: no rank is left waiting), 2
 * on a usage or config error or a world size that does not fit MODE (on every rank). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dtrain/comm_mpi.h>
#include <dtrain/dtrain.h>

enum { EXIT_USAGE = 2, LINE_MAX_CHARS = 160 };

/* ---- the world ------------------------------------------------------------------------ */

typedef struct world {
    int mpi; /* MPI was initialised (the program was started by a launcher) */
    int rank, size;
    dt_comm *comm; /* MPI_COMM_WORLD for dtrain; NULL in one process */
} world;

/* A launcher (mpirun, srun) announces itself in the environment; without one the program
 * is a world of one and need not start MPI at all. */
static int launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]) != NULL)
            return 1;
    return 0;
}

static int world_open(world *w, int *argc, char ***argv)
{
    *w = (world){.rank = 0, .size = 1};
    if (!launched())
        return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "linreg_walkthrough: MPI_Init failed\n");
        return -1;
    }
    w->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    return 0;
}

static void world_close(world *w)
{
    dt_comm_free(w->comm);
    w->comm = NULL;
    if (w->mpi)
        MPI_Finalize();
    w->mpi = 0;
}

/* A failure on some ranks only (a collective that timed out, a file one rank cannot read)
 * would leave the others waiting in the next collective: end the whole job. */
static int fail(world *w, const char *what)
{
    fprintf(stderr, "linreg_walkthrough: rank %d: %s: %s\n", w->rank, what, dt_last_error());
    if (w->mpi && w->size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    world_close(w);
    return 1;
}

/* ---- the layout ----------------------------------------------------------------------- */

/* The tensor-parallel size MODE asks for on `size` ranks (dp is the rest: size / tp), or
 * 0 with the reason in `why` when the world does not fit. Every rank reaches the same
 * verdict from the same numbers, so a mismatch ends every rank, never one. */
static int mode_tp(const char *mode, int size, int64_t q, char *why, size_t n)
{
    if (strcmp(mode, "single") == 0 && size == 1)
        return 1;
    if (strcmp(mode, "dp") == 0 && size >= 2)
        return 1;
    if (strcmp(mode, "tp") == 0 && size >= 2 && size <= q)
        return size;
    if (strcmp(mode, "dptp") == 0 && size >= 4 && size % 2 == 0 && q >= 2)
        return 2;
    if (strcmp(mode, "single") == 0)
        snprintf(why, n,
                 "single runs in one process, not %d (start it without mpirun, or "
                 "with -np 1)",
                 size);
    else if (strcmp(mode, "dp") == 0)
        snprintf(why, n, "dp needs 2 or more ranks, got %d (mpirun -np 2)", size);
    else if (strcmp(mode, "tp") == 0)
        snprintf(why, n, "tp splits W's %lld rows over 2 to %lld ranks, got %d (mpirun -np 2)",
                 (long long)q, (long long)q, size);
    else if (strcmp(mode, "dptp") == 0)
        snprintf(why, n,
                 "dptp runs dp x tp 2 on an even number of ranks, 4 or more, got %d "
                 "(mpirun -np 4 --oversubscribe)",
                 size);
    else
        snprintf(why, n, "unknown mode '%s': single, dp, tp or dptp", mode);
    return 0;
}

/* ---- the closed-form solution --------------------------------------------------------- */

/* Solves A x = b in place for symmetric positive definite A (n x n, row-major) by Cholesky,
 * A = L L^T, for `nrhs` right-hand sides (b is n x nrhs). Returns -1 when A is not positive
 * definite (features that are linearly dependent). */
static int cholesky_solve(double *a, double *b, int n, int nrhs)
{
    for (int j = 0; j < n; j++) { /* L overwrites A's lower triangle */
        double d = a[j * n + j];
        for (int k = 0; k < j; k++)
            d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0.0))
            return -1;
        a[j * n + j] = sqrt(d);
        for (int i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            for (int k = 0; k < j; k++)
                s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s / a[j * n + j];
        }
    }
    for (int c = 0; c < nrhs; c++) {
        for (int i = 0; i < n; i++) { /* L y = b */
            double s = b[i * nrhs + c];
            for (int k = 0; k < i; k++)
                s -= a[i * n + k] * b[k * nrhs + c];
            b[i * nrhs + c] = s / a[i * n + i];
        }
        for (int i = n - 1; i >= 0; i--) { /* L^T x = y */
            double s = b[i * nrhs + c];
            for (int k = i + 1; k < n; k++)
                s -= a[k * n + i] * b[k * nrhs + c];
            b[i * nrhs + c] = s / a[i * n + i];
        }
    }
    return 0;
}

/* The least-squares [W b] on the training set: with Z = [X 1] (N x (p+1)), the normal
 * equations Z^T Z T = Z^T Y give T ((p+1) x q) = [W^T; b^T]. Written into theta in dtrain's
 * layout (W (q, p) row-major, then b (q)), in double. Returns -1 when Z^T Z is singular. */
static int least_squares(const dt_dataset *ds, double *theta)
{
    const int64_t n = ds->n, p = ds->sample_shape.d[0], q = ds->target_width, m = p + 1;
    double *a = calloc((size_t)(m * m), sizeof *a); /* Z^T Z */
    double *t = calloc((size_t)(m * q), sizeof *t); /* Z^T Y, then T */
    int rc = -1;
    if (a == NULL || t == NULL)
        goto done;
    for (int64_t s = 0; s < n; s++) {
        const float *x = ds->x_f32 + s * p, *y = ds->y_f32 + s * q;
        for (int64_t i = 0; i < m; i++) {
            const double zi = i < p ? (double)x[i] : 1.0;
            for (int64_t j = 0; j <= i; j++)
                a[i * m + j] += zi * (j < p ? (double)x[j] : 1.0);
            for (int64_t k = 0; k < q; k++)
                t[i * q + k] += zi * (double)y[k];
        }
    }
    for (int64_t i = 0; i < m; i++) /* the upper triangle by symmetry */
        for (int64_t j = i + 1; j < m; j++)
            a[i * m + j] = a[j * m + i];
    if (cholesky_solve(a, t, (int)m, (int)q) != 0)
        goto done;
    for (int64_t k = 0; k < q; k++) {
        for (int64_t j = 0; j < p; j++)
            theta[k * p + j] = t[j * q + k];
        theta[q * p + k] = t[p * q + k];
    }
    rc = 0;
done:
    free(a);
    free(t);
    return rc;
}

/* MSE = 1/(N q) ||X W^T + b - Y||^2, torch.nn.MSELoss's mean over samples and targets as
 * dtrain's loss, of theta = [W b] in dtrain's layout, in double. */
static double mse_of(const dt_dataset *ds, const double *theta)
{
    const int64_t n = ds->n, p = ds->sample_shape.d[0], q = ds->target_width;
    double sum = 0.0;
    for (int64_t s = 0; s < n; s++) {
        const float *x = ds->x_f32 + s * p, *y = ds->y_f32 + s * q;
        for (int64_t k = 0; k < q; k++) {
            double r = theta[q * p + k] - (double)y[k];
            for (int64_t j = 0; j < p; j++)
                r += theta[k * p + j] * (double)x[j];
            sum += r * r;
        }
    }
    return sum / ((double)n * (double)q);
}

/* ---- what each rank holds ------------------------------------------------------------- */

/* "W rows 2:4 of 4 (2x16)", "b 2:4 of 4", "W whole (4x16)": part t of a tensor named sym. */
static void describe_part(const dt_param_info *t, const char *sym, char *buf, size_t n)
{
    char shape[32];
    if (t->ndim == 2)
        snprintf(shape, sizeof shape, "(%lldx%lld)", (long long)t->shape[0],
                 (long long)t->shape[1]);
    else
        snprintf(shape, sizeof shape, "(%lld)", (long long)t->shape[0]);
    if (t->split_dim < 0)
        snprintf(buf, n, "%s whole %s", sym, shape);
    else if (t->ndim == 1)
        snprintf(buf, n, "%s %lld:%lld of %lld", sym, (long long)t->split_begin,
                 (long long)t->split_end, (long long)t->whole_shape[0]);
    else
        snprintf(buf, n, "%s %s %lld:%lld of %lld %s", sym, t->split_dim == 0 ? "rows" : "columns",
                 (long long)t->split_begin, (long long)t->split_end,
                 (long long)t->whole_shape[t->split_dim], shape);
}

/* This rank's line: its place on the grid (dt_trainer_layout) and its slices. */
static void rank_line(dt_trainer *t, char *buf, size_t n)
{
    const dt_model *m = dt_trainer_model(t);
    dt_train_layout lay;
    dt_trainer_layout(t, &lay);
    char w[64], b[64];
    describe_part(dt_model_tensor(m, 0), "W", w, sizeof w);
    describe_part(dt_model_tensor(m, 1), "b", b, sizeof b);
    snprintf(buf, n, "rank %d (dp %d, tp %d): %s, %s", lay.world_rank, lay.dp_rank, lay.tp_rank, w,
             b);
}

/* Every rank's line, printed by rank 0 in rank order. Collective over the world. */
static int print_rank_lines(const world *w, const char *mine)
{
    char *all = NULL;
    if (!w->mpi) {
        printf("%s\n", mine);
        return 0;
    }
    if (w->rank == 0 && (all = malloc((size_t)w->size * LINE_MAX_CHARS)) == NULL)
        return -1; /* a failure before any rank sends: the caller aborts the job */
    MPI_Gather(mine, LINE_MAX_CHARS, MPI_CHAR, all, LINE_MAX_CHARS, MPI_CHAR, 0, MPI_COMM_WORLD);
    for (int r = 0; w->rank == 0 && r < w->size; r++)
        printf("%s\n", all + (size_t)r * LINE_MAX_CHARS);
    free(all);
    return 0;
}

/* ---- configuration -------------------------------------------------------------------- */

typedef struct options {
    const char *mode;
    const char *config;
    int print_params;
} options;

static int set_key(dt_config *cfg, const char *key, long long value)
{
    char text[96];
    snprintf(text, sizeof text, "%s=%lld", key, value);
    return dt_config_set(cfg, text, "linreg_walkthrough") == DT_OK ? 0 : -1;
}

/* The config file, then the key=value arguments in order. */
static int load_config(int argc, char **argv, const options *o, dt_config *cfg)
{
    *cfg = dt_config_default();
    if (dt_config_load(o->config, cfg) != DT_OK)
        return -1;
    for (int i = 2; i < argc; i++)
        if (strchr(argv[i], '=') != NULL &&
            dt_config_set(cfg, argv[i], "linreg_walkthrough") != DT_OK)
            return -1;
    return 0;
}

/* What the closed form and the slices assume: one linear layer with a bias, the MSE, float
 * features (synthetic or CSV data, not images). */
static int check_linreg(const dt_config *cfg, char *why, size_t n)
{
    if (cfg->nlayers != 1 || cfg->layers[0].kind != DT_LAYER_LINEAR || !cfg->layers[0].bias ||
        cfg->loss != DT_LOSS_MSE || cfg->data.kind == DT_DATA_IDX) {
        snprintf(why, n,
                 "the config must train one linear layer with a bias and loss.kind mse "
                 "on regression data (as examples/linreg.ini)");
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.config = "examples/linreg.ini"};
    if (argc < 2 || argv[1][0] == '-')
        return -1;
    o->mode = argv[1];
    int files = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--params") == 0)
            o->print_params = 1;
        else if (strchr(argv[i], '=') != NULL)
            continue; /* an override: load_config applies it after the file */
        else if (argv[i][0] == '-' || ++files > 1)
            return -1; /* an unknown option, or a second file */
        else
            o->config = argv[i];
    }
    return 0;
}

/* ---- the run -------------------------------------------------------------------------- */

static dt_status on_epoch(void *ctx, const dt_epoch_info *e)
{
    const world *w = ctx;
    const int64_t n = e->epoch + 1;
    if (w->rank == 0 && (n == 1 || n % 5 == 0))
        printf("epoch %2lld: training MSE over the epoch %.6f\n", (long long)n, e->train_loss);
    return DT_OK;
}

/* Rank 0: the summary against least squares. */
static int report(const dt_trainer *t, const float *whole, size_t count, double test_mse,
                  int print_params)
{
    const dt_dataset *train = dt_trainer_train_set(t);
    double *theta = malloc(count * sizeof *theta), *star = malloc(count * sizeof *star);
    int rc = -1;
    if (theta == NULL || star == NULL) {
        fprintf(stderr, "linreg_walkthrough: out of memory\n");
        goto done;
    }
    if (train->features != DT_FEATURES_F32 || train->targets != DT_TARGETS_F32) {
        fprintf(stderr, "linreg_walkthrough: the closed form needs float features and targets\n");
        goto done;
    }
    if (least_squares(train, star) != 0) {
        fprintf(stderr, "linreg_walkthrough: the normal equations have no unique solution "
                        "(linearly dependent features)\n");
        goto done;
    }
    double dist = 0.0;
    for (size_t i = 0; i < count; i++) {
        theta[i] = (double)whole[i];
        dist += (theta[i] - star[i]) * (theta[i] - star[i]);
    }
    const double mse = mse_of(train, theta), best = mse_of(train, star);
    printf("final training MSE      %.8f  (%lld samples x %lld targets)\n", mse,
           (long long)train->n, (long long)train->target_width);
    printf("least-squares MSE       %.8f  (normal equations, same samples)\n", best);
    printf("MSE gap                 %+.4f%%\n", 100.0 * (mse / best - 1.0));
    printf("||theta - theta*||      %.3e  (Frobenius norm over [W b], %zu numbers)\n", sqrt(dist),
           count);
    printf("test MSE                %.8f  (%lld held-out samples)\n", test_mse,
           (long long)dt_trainer_test_set(t)->n);
    if (print_params) {
        printf("theta");
        for (size_t i = 0; i < count; i++)
            printf(" %.9g", theta[i]);
        printf("\n");
    }
    rc = 0;
done:
    free(theta);
    free(star);
    return rc;
}

/* Rank 0: what a training step's collectives moved, from the run's totals (read before
 * the final gather and evaluation add theirs). A tp all-gather counts the block this rank
 * contributes; an all-reduce its whole buffer. */
static void report_comm(const dt_trainer *t)
{
    dt_train_comm_stats cs;
    dt_trainer_comm_stats(t, &cs);
    if (cs.tp <= 1 && cs.dp <= 1) {
        printf("per step, rank 0 communicated nothing (%lld steps in one process)\n",
               (long long)cs.optim_steps);
        return;
    }
    const double steps = (double)(cs.optim_steps > 0 ? cs.optim_steps : 1);
    printf("per step, rank 0");
    if (cs.tp > 1)
        printf(" put %.0f bytes into %.0f tp collective(s)", (double)cs.tp_bytes / steps,
               (double)cs.tp_calls / steps);
    if (cs.dp > 1)
        printf("%s all-reduced %zu bytes of gradients over its dp group", cs.tp > 1 ? " and" : "",
               cs.bytes_per_step);
    printf(" (%lld steps)\n", (long long)cs.optim_steps);
}

/* The run's settings: the file, the overrides, then the layout. W is far below
 * tp_min_weights' default (65536), which would keep it whole. The global batch stays
 * train.batch whatever dp is: each step's samples are split into dp chunks, so every
 * layout computes the one-process gradient. Evaluation only at the end, so that the
 * communication figures are the training steps'. */
static int configure(int argc, char **argv, const options *o, const world *w, dt_config *cfg,
                     int *tp)
{
    char why[256];
    if (load_config(argc, argv, o, cfg) != 0) {
        fprintf(stderr, "linreg_walkthrough: rank %d: %s\n", w->rank, dt_last_error());
        return -1;
    }
    if (check_linreg(cfg, why, sizeof why) != 0 ||
        (*tp = mode_tp(o->mode, w->size, cfg->layers[0].out_features, why, sizeof why)) == 0) {
        if (w->rank == 0)
            fprintf(stderr, "linreg_walkthrough: %s\n", why);
        return -1;
    }
    /* The threshold only under tp: set without it, dt_config_check refuses it as a setting
     * that changes nothing. */
    if (set_key(cfg, "parallel.tp", *tp) != 0 ||
        (*tp > 1 && set_key(cfg, "parallel.tp_min_weights", 0) != 0) ||
        (cfg->parallel.global_batch == 0 &&
         set_key(cfg, "parallel.global_batch", (long long)cfg->train.batch) != 0) ||
        set_key(cfg, "train.eval", 0) != 0) {
        fprintf(stderr, "linreg_walkthrough: rank %d: %s\n", w->rank, dt_last_error());
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    world w;
    options o;
    dt_config cfg;
    dt_trainer *t = NULL;
    int tp = 1;
    char line[LINE_MAX_CHARS] = ""; /* zeroed: all of it is sent */
    if (world_open(&w, &argc, &argv) != 0)
        return 1;
    if (parse_args(argc, argv, &o) != 0) {
        if (w.rank == 0)
            fprintf(stderr, "usage: linreg_walkthrough single|dp|tp|dptp [CONFIG] [--params] "
                            "[section.key=value ...]\n");
        world_close(&w);
        return EXIT_USAGE;
    }
    /* Every rank reads the same file and reaches the same verdict: all stop, or none. */
    if (configure(argc, argv, &o, &w, &cfg, &tp) != 0) {
        world_close(&w);
        return EXIT_USAGE;
    }
    if (w.rank == 0)
        printf("linreg_walkthrough %s: %d rank%s as dp %d x tp %d, %lld samples per step\n", o.mode,
               w.size, w.size == 1 ? "" : "s", w.size / tp, tp,
               (long long)cfg.parallel.global_batch);
    /* One process passes no communicator: nothing is sent. */
    if (w.size > 1) {
        dt_comm_options copt;
        dt_config_comm_options(&cfg, &copt);
        if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &w.comm) != DT_OK ||
            dt_comm_set_options(w.comm, &copt) != DT_OK)
            return fail(&w, "communicator");
    }
    if (dt_trainer_create(&cfg, w.comm, &t) != DT_OK)
        return fail(&w, "trainer");
    rank_line(t, line, sizeof line);
    if (print_rank_lines(&w, line) != 0)
        goto failed;
    dt_train_callbacks cb = {.ctx = &w, .on_epoch = on_epoch};
    if (dt_trainer_run(t, &cb) != DT_OK)
        goto failed;
    if (w.rank == 0)
        report_comm(t);
    /* The whole [W b]: every rank takes part, each tp group gathering its parts. */
    const float *whole = NULL;
    double test_mse = 0.0, accuracy = 0.0;
    if (dt_trainer_whole_params(t, &whole) != DT_OK ||
        dt_trainer_evaluate(t, &test_mse, &accuracy) != DT_OK)
        goto failed;
    if (w.rank == 0 && report(t, whole, dt_model_whole_param_count(dt_trainer_model(t)), test_mse,
                              o.print_params) != 0)
        goto failed;
    dt_trainer_free(t);
    world_close(&w);
    return 0;
failed:
    dt_trainer_free(t);
    return fail(&w, "training");
}
