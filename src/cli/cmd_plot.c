/* cmd_plot.c — `dtrain plot FILE -o OUT.svg`: a picture of what a run wrote, read without
 * opening the data. FILE is one of
 *   - a metrics file (dtrain train --metrics): loss and accuracy against steps, samples/s
 *     per epoch; with evaluation records (train.eval_every) the test loss (a text run's
 *     validation loss in nats per byte), accuracy and samples/s (tokens/s) at each;
 *   - a trace (dtrain train --trace): each rank's time per phase, stacked: the straggler is
 *     the longest bar, and where its time went is its colours;
 *   - bench-comm's JSON lines (dtrain bench-comm --json): bus bandwidth against message size
 *     for every operation and algorithm, on logarithmic axes.
 * The kind is told from the content. The SVG is written atomically. */
#define _GNU_SOURCE /* open_memstream is POSIX 2008, declared with _POSIX_C_SOURCE too */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli/svg.h"
#include "dtrain/obs.h"

/* A growable column of numbers (plotting is not a training step). */
typedef struct column {
    double *v;
    int n, cap;
} column;

static int push(column *c, double v)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        double *grown = realloc(c->v, sizeof(double) * (size_t)cap);
        if (grown == NULL)
            return -1;
        c->v = grown;
        c->cap = cap;
    }
    c->v[c->n++] = v;
    return 0;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* ---- metrics ---- */

/* The columns: logged steps; epoch records; evaluation records (train.eval_every), whose
 * M_TEXT counts those of a text run (they carry bits_per_byte: the loss is validation
 * nats per byte, the rate tokens/s). */
enum {
    M_STEP,
    M_STEP_LOSS,
    M_EPOCH_STEP,
    M_TRAIN,
    M_TEST,
    M_ACC,
    M_EPOCH,
    M_RATE,
    M_EVAL_STEP,
    M_EVAL_TRAIN,
    M_EVAL_TEST,
    M_EVAL_ACC,
    M_EVAL_RATE,
    M_TEXT,
    M_COLS
};

static void plot_metrics(FILE *f, column *c)
{
    const int text = c[M_TEXT].n > 0, evals = c[M_EVAL_STEP].n > 0;
    const dt_svg_series all[] = {
        {"train loss (logged steps)", c[M_STEP].v, c[M_STEP_LOSS].v, c[M_STEP].n, 0},
        {"train loss (epoch mean)", c[M_EPOCH_STEP].v, c[M_TRAIN].v, c[M_EPOCH_STEP].n, 1},
        {"test loss", c[M_EPOCH_STEP].v, c[M_TEST].v, evals ? 0 : c[M_EPOCH_STEP].n, 1},
        {"train loss (since the last evaluation)", c[M_EVAL_STEP].v, c[M_EVAL_TRAIN].v,
         c[M_EVAL_STEP].n, 1},
        {text ? "validation loss (nats per byte)" : "test loss", c[M_EVAL_STEP].v, c[M_EVAL_TEST].v,
         c[M_EVAL_STEP].n, 1}};
    dt_svg_series loss[5];
    int nloss = 0;
    for (int i = 0; i < 5; i++)
        if (all[i].n > 0)
            loss[nloss++] = all[i];
    /* With evaluation records (train.eval_every), accuracy and throughput are theirs. */
    const dt_svg_series acc[] = {
        evals ? (dt_svg_series){text ? "next-byte accuracy (validation)" : "test accuracy",
                                c[M_EVAL_STEP].v, c[M_EVAL_ACC].v, c[M_EVAL_STEP].n, 1}
              : (dt_svg_series){"test accuracy", c[M_EPOCH_STEP].v, c[M_ACC].v, c[M_EPOCH_STEP].n,
                                1}};
    const dt_svg_series rate[] = {
        evals ? (dt_svg_series){text ? "tokens/s" : "samples/s", c[M_EVAL_STEP].v, c[M_EVAL_RATE].v,
                                c[M_EVAL_STEP].n, 1}
              : (dt_svg_series){"samples/s", c[M_EPOCH].v, c[M_RATE].v, c[M_EPOCH].n, 1}};
    /* Steps and epochs are counts; an accuracy is a fraction. */
    const dt_svg_axis_opts count = {.whole = 1}, fraction = {.fraction = 1};
    const dt_svg_chart charts[3] = {{.title = text ? "Loss (validation: nats per byte)" : "Loss",
                                     .xlabel = "optimizer step",
                                     .ylabel = "loss",
                                     .series = loss,
                                     .nseries = nloss,
                                     .x = count},
                                    {.title = text ? "Validation accuracy" : "Test accuracy",
                                     .xlabel = "optimizer step",
                                     .ylabel = "accuracy",
                                     .series = acc,
                                     .nseries = 1,
                                     .x = count,
                                     .y = fraction},
                                    {.title = "Throughput",
                                     .xlabel = evals ? "optimizer step" : "epoch",
                                     .ylabel = text ? "training tokens/s" : "training samples/s",
                                     .series = rate,
                                     .nseries = 1,
                                     .x = count}};
    dt_svg_begin(f, 900, 3 * 300);
    for (int i = 0; i < 3; i++)
        dt_svg_line_chart(f, &charts[i], 0, 300.0 * i, 900, 300);
    dt_svg_end(f);
}

static int metrics_row(const cJSON *o, column *c)
{
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    if (!cJSON_IsString(ev))
        return 0;
    int bad = 0;
    if (strcmp(ev->valuestring, "step") == 0) {
        bad |= push(&c[M_STEP], num(o, "step")) | push(&c[M_STEP_LOSS], num(o, "loss"));
    } else if (strcmp(ev->valuestring, "epoch") == 0) {
        bad |= push(&c[M_EPOCH_STEP], num(o, "steps")) | push(&c[M_TRAIN], num(o, "train_loss"));
        bad |= push(&c[M_TEST], num(o, "test_loss")) | push(&c[M_ACC], num(o, "test_accuracy"));
        bad |= push(&c[M_EPOCH], num(o, "epoch")) | push(&c[M_RATE], num(o, "samples_per_s"));
    } else if (strcmp(ev->valuestring, "eval") == 0) {
        const int text = cJSON_GetObjectItemCaseSensitive(o, "bits_per_byte") != NULL;
        bad |= push(&c[M_EVAL_STEP], num(o, "step")) |
               push(&c[M_EVAL_TRAIN], num(o, "train_loss")) |
               push(&c[M_EVAL_TEST], num(o, "test_loss")) |
               push(&c[M_EVAL_ACC], num(o, "test_accuracy")) |
               push(&c[M_EVAL_RATE], num(o, text ? "tokens_per_s" : "samples_per_s"));
        if (text)
            bad |= push(&c[M_TEXT], 1.0);
    }
    return bad;
}

/* ---- bench-comm ---- */

#define MAX_CURVES 32

typedef struct curve {
    char label[64];
    column size, busbw;
} curve;

static int comm_row(const cJSON *o, curve *cv, int *ncurves, int *ranks)
{
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "operation");
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(o, "algorithm");
    if (!cJSON_IsString(op) || !cJSON_IsString(al))
        return 0;
    char label[64];
    snprintf(label, sizeof label, "%s, %s", op->valuestring, al->valuestring);
    int k = 0;
    while (k < *ncurves && strcmp(cv[k].label, label) != 0)
        k++;
    if (k == *ncurves) {
        if (k == MAX_CURVES)
            return 0; /* more curves than a picture can show apart */
        snprintf(cv[k].label, sizeof cv[k].label, "%s", label);
        (*ncurves)++;
    }
    *ranks = (int)num(o, "ranks");
    return push(&cv[k].size, num(o, "size")) | push(&cv[k].busbw, num(o, "busbw_GBps"));
}

/* One panel per operation, a curve per algorithm ("allreduce, ring": the panel is the part
 * before the comma). */
static void plot_comm(FILE *f, const curve *cv, int n, int ranks)
{
    char ops[MAX_CURVES][64];
    int nops = 0;
    for (int k = 0; k < n; k++) {
        const size_t len = strcspn(cv[k].label, ",");
        int seen = 0;
        for (int o = 0; o < nops && !seen; o++)
            seen = strlen(ops[o]) == len && strncmp(ops[o], cv[k].label, len) == 0;
        if (!seen)
            snprintf(ops[nops++], sizeof ops[0], "%.*s", (int)len, cv[k].label);
    }
    dt_svg_begin(f, 900, 320 * nops);
    for (int o = 0; o < nops; o++) {
        dt_svg_series s[MAX_CURVES];
        int ns = 0;
        const size_t len = strlen(ops[o]);
        for (int k = 0; k < n; k++)
            if (strncmp(cv[k].label, ops[o], len) == 0 && cv[k].label[len] == ',')
                s[ns++] = (dt_svg_series){cv[k].label + len + 2, cv[k].size.v, cv[k].busbw.v,
                                          cv[k].size.n, 1};
        char title[128];
        snprintf(title, sizeof title, "%s: bus bandwidth on %d ranks (dtrain bench-comm)", ops[o],
                 ranks);
        const dt_svg_chart c = {.title = title,
                                .xlabel = "message size (bytes)",
                                .ylabel = "bus bandwidth (GB/s)",
                                .logx = 1,
                                .logy = 1,
                                .series = s,
                                .nseries = ns};
        dt_svg_line_chart(f, &c, 0, 320.0 * o, 900, 320);
    }
    dt_svg_end(f);
}

/* JSON lines: metrics or bench-comm, told by the first row that is either. */
static int plot_lines(FILE *f, char *text, const char *path)
{
    column m[M_COLS] = {{0}};
    curve *cv = calloc(MAX_CURVES, sizeof *cv);
    int ncurves = 0, ranks = 0, kind = 0, bad = cv == NULL, rows = 0; /* kind 1 metrics, 2 comm */
    long lineno = 0, unread = 0;
    for (char *line = text, *next = NULL; line != NULL && !bad; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        lineno++;
        if (line[strspn(line, " \t\r")] == '\0')
            continue;
        cJSON *o = cJSON_Parse(line);
        if (o == NULL) {
            /* Said, not fatal: a run killed while writing leaves its last line cut. */
            if (unread++ < 3)
                fprintf(stderr, "dtrain plot: warning: %s:%ld: not a JSON object (left out)\n",
                        path, lineno);
            continue;
        }
        if (kind == 0)
            kind = cJSON_GetObjectItemCaseSensitive(o, "event") != NULL        ? 1
                   : cJSON_GetObjectItemCaseSensitive(o, "busbw_GBps") != NULL ? 2
                                                                               : 0;
        bad |= kind == 1 ? metrics_row(o, m) : kind == 2 ? comm_row(o, cv, &ncurves, &ranks) : 0;
        rows += kind != 0;
        cJSON_Delete(o);
    }
    if (unread > 3)
        fprintf(stderr, "dtrain plot: warning: %s: %ld lines in all not JSON objects (left out)\n",
                path, unread);
    if (!bad && kind == 1)
        plot_metrics(f, m);
    else if (!bad && kind == 2)
        plot_comm(f, cv, ncurves, ranks);
    for (int i = 0; i < M_COLS; i++)
        free(m[i].v);
    for (int k = 0; cv != NULL && k < ncurves; k++) {
        free(cv[k].size.v);
        free(cv[k].busbw.v);
    }
    free(cv);
    if (bad)
        fprintf(stderr, "dtrain plot: %s: out of memory\n", path);
    else if (kind == 0 || rows == 0)
        fprintf(stderr,
                "dtrain plot: %s: neither a metrics file, a trace nor bench-comm JSON lines\n",
                path);
    return bad || kind == 0 || rows == 0 ? DT_EXIT_FAIL : DT_EXIT_OK;
}

/* ---- trace ---- */

#define MAX_RANKS 256

static int plot_trace(FILE *f, const cJSON *events, const char *path)
{
    static double t[MAX_RANKS * DT_PHASE_COUNT];
    memset(t, 0, sizeof t);
    int ranks = 0;
    const cJSON *e = NULL;
    cJSON_ArrayForEach(e, events)
    {
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const double pid = num(e, "pid"), dur = num(e, "dur");
        if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "phase") != 0 ||
            !cJSON_IsString(name) || !(pid >= 0 && pid < MAX_RANKS) || !isfinite(dur))
            continue;
        for (int p = 0; p < DT_PHASE_COUNT; p++)
            if (strcmp(name->valuestring, dt_phase_name((dt_phase)p)) == 0)
                t[(int)pid * DT_PHASE_COUNT + p] += dur / 1e3;
        ranks = (int)pid + 1 > ranks ? (int)pid + 1 : ranks;
    }
    if (ranks == 0) {
        fprintf(stderr, "dtrain plot: %s: a trace without phase events\n", path);
        return DT_EXIT_FAIL;
    }
    static char names[MAX_RANKS][16];
    const char *rows[MAX_RANKS], *parts[DT_PHASE_COUNT];
    for (int r = 0; r < ranks; r++) {
        snprintf(names[r], sizeof names[r], "rank %d", r);
        rows[r] = names[r];
    }
    for (int p = 0; p < DT_PHASE_COUNT; p++)
        parts[p] = dt_phase_name((dt_phase)p);
    const int h = 80 + 40 * ranks;
    dt_svg_begin(f, 1000, h);
    dt_svg_stacked_bars(f, "Time by phase on each rank (dtrain train --trace)", "ms", rows, ranks,
                        parts, DT_PHASE_COUNT, t, 0, 0, 1000, h);
    dt_svg_end(f);
    return DT_EXIT_OK;
}

static int usage(FILE *out)
{
    fprintf(out, "usage: dtrain plot FILE -o OUT.svg\n\n"
                 "Draws what a run wrote as an SVG picture. FILE is a metrics file (dtrain train\n"
                 "--metrics: loss and accuracy against steps, samples/s per epoch), a trace\n"
                 "(dtrain train --trace: each rank's time per phase, stacked, so the straggler\n"
                 "is the longest bar), or bench-comm JSON lines (dtrain bench-comm --json: bus\n"
                 "bandwidth against message size, logarithmic axes). Ticks sit at round values\n"
                 "(1, 2 or 5 x 10^k apart), large numbers read 125k or 1.2M.\n");
    return out == stdout ? DT_EXIT_OK : DT_EXIT_USAGE;
}

int dt_cmd_plot(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return usage(stdout);
    if (argc != 4 || strcmp(argv[2], "-o") != 0)
        return usage(stderr);
    char *text = NULL, *svg = NULL;
    size_t n = 0, nsvg = 0;
    if (dt_read_file(argv[1], "plot", &text, &n) != DT_OK) {
        fprintf(stderr, "dtrain %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    FILE *f = open_memstream(&svg, &nsvg);
    int rc = DT_EXIT_FAIL;
    if (f != NULL) {
        cJSON *whole = cJSON_ParseWithLength(text, n);
        const cJSON *events = cJSON_GetObjectItemCaseSensitive(whole, "traceEvents");
        rc = cJSON_IsArray(events) ? plot_trace(f, events, argv[1]) : plot_lines(f, text, argv[1]);
        cJSON_Delete(whole);
        fclose(f);
    }
    if (rc == DT_EXIT_OK && dt_write_file_atomic(argv[3], "plot", svg, nsvg) != DT_OK) {
        fprintf(stderr, "dtrain %s\n", dt_last_error());
        rc = DT_EXIT_FAIL;
    }
    if (rc == DT_EXIT_OK)
        printf("dtrain plot: %s written\n", argv[3]);
    free(svg);
    free(text);
    return rc;
}
