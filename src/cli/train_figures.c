/* train_figures.c — the end-of-run report of the run's figures (train_figures.h): every
 * figure printed, recorded and written as it names itself. Nothing here knows a strategy,
 * a role or a figure of one (scripts/check-strategy.py keeps it so). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/train_figures.h"

/* "0.4071 MB", "0.5712 ms", "12%", "yes", "3": a figure's value as the report prints it. */
static void format_value(const dt_figure *f, char *buf, size_t nbytes)
{
    const double v = f->value;
    const char *unit = f->unit != NULL ? f->unit : "";
    if (f->flags & DT_FIGURE_YES_NO)
        snprintf(buf, nbytes, "%s", v != 0.0 ? "yes" : "no");
    else if (strcmp(unit, "B") == 0) /* four significant digits, whatever the size */
        snprintf(buf, nbytes, "%.4g MB", v / 1e6);
    else if (strcmp(unit, "s") == 0 && fabs(v) < 1.0)
        snprintf(buf, nbytes, "%.4g ms", v * 1e3);
    else if (strcmp(unit, "s") == 0)
        snprintf(buf, nbytes, "%.4g s", v);
    else if (strcmp(unit, "%") == 0)
        snprintf(buf, nbytes, "%.0f%%", v);
    else if (isfinite(v) && v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, nbytes, "%.0f%s%s", v, unit[0] ? " " : "", unit);
    else
        snprintf(buf, nbytes, "%.4g%s%s", v, unit[0] ? " " : "", unit);
}

static void append(char *buf, size_t nbytes, const char *text)
{
    const size_t used = strlen(buf);
    if (used + 1 < nbytes)
        snprintf(buf + used, nbytes - used, "%s", text);
}

/* The printed figures of line `title` whose DT_FIGURE_EACH_RANK flag is `each`, appended to
 * buf as "dtrain: TITLE, rank R: what: value; ...". `alone`: the communication timed alone,
 * for a DT_FIGURE_VS_ALONE figure. */
static void format_line(const dt_figure *figs, int n, const char *title, unsigned each, int rank,
                        double alone, char *buf, size_t nbytes)
{
    char text[256], value[64];
    snprintf(text, sizeof text, "%sdtrain: %s, rank %d: ", buf[0] ? "\n" : "", title, rank);
    append(buf, nbytes, text);
    int first = 1;
    for (int i = 0; i < n; i++) {
        const dt_figure *f = &figs[i];
        if (f->what == NULL || (f->flags & DT_FIGURE_EACH_RANK) != each ||
            strcmp(f->line, title) != 0)
            continue;
        format_value(f, value, sizeof value);
        snprintf(text, sizeof text, "%s%s: %s", first ? "" : "; ", f->what, value);
        append(buf, nbytes, text);
        first = 0;
        if (f->flags & DT_FIGURE_VS_ALONE) {
            /* The wait of the rank that ended backward last against the same communication
             * alone: what backward did not hide of it. */
            const double hidden =
                alone > 0 ? 100.0 * (1.0 - (f->value < alone ? f->value / alone : 1.0)) : 0.0;
            snprintf(text, sizeof text, " (alone: %.4g ms, hidden: %.0f%%)", alone * 1e3, hidden);
            append(buf, nbytes, text);
        }
    }
}

/* Every line with printed figures whose DT_FIGURE_EACH_RANK flag is `each`, in the order of
 * their first figure, into buf (one line each, joined with newlines). */
static void format_lines(const dt_figure *figs, int n, unsigned each, int rank, double alone,
                         char *buf, size_t nbytes)
{
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        const dt_figure *f = &figs[i];
        if (f->what == NULL || (f->flags & DT_FIGURE_EACH_RANK) != each)
            continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = figs[j].what != NULL && (figs[j].flags & DT_FIGURE_EACH_RANK) == each &&
                   strcmp(figs[j].line, f->line) == 0;
        if (!seen)
            format_line(figs, n, f->line, each, rank, alone, buf, nbytes);
    }
}

static dt_status write_record(FILE *metrics, const dt_config *cfg, const dt_figure *figs, int n)
{
    char mode[64];
    dt_compress_format(&cfg->parallel.compress, mode, sizeof mode);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return dt_fail(DT_ERR_NOMEM, "metrics: the comm record");
    cJSON_AddStringToObject(o, "event", "comm");
    cJSON_AddStringToObject(o, "strategy", dt_strategy_name(cfg->parallel.strategy));
    cJSON_AddStringToObject(o, "compress", mode);
    /* The first of the steps went uncompressed (dense_bytes_per_step each). */
    cJSON_AddNumberToObject(o, "compress_warmup_steps", (double)cfg->parallel.compress.warmup);
    for (int i = 0; i < n; i++)
        if (figs[i].name != NULL)
            cJSON_AddNumberToObject(o, figs[i].name, figs[i].value);
    char *s = cJSON_PrintUnformatted(o);
    if (s != NULL) {
        fprintf(metrics, "%s\n", s);
        fflush(metrics);
        cJSON_free(s);
    }
    cJSON_Delete(o);
    return DT_OK;
}

static dt_status write_scalars(dt_tb *tb, const dt_figure *figs, int n)
{
    int64_t step = 0; /* at the run's last step: the trainer's own figure */
    for (int i = 0; i < n; i++)
        if (figs[i].name != NULL && strcmp(figs[i].name, "steps") == 0)
            step = (int64_t)figs[i].value;
    for (int i = 0; i < n; i++) {
        if (figs[i].name == NULL || !isfinite(figs[i].value))
            continue;
        char tag[96];
        snprintf(tag, sizeof tag, "comm/%s", figs[i].name);
        dt_status st = dt_tb_scalar(tb, tag, step, figs[i].value);
        if (st != DT_OK)
            return st;
    }
    return DT_OK;
}

dt_status dt_cli_report_figures(dt_trainer *t, const dt_cli_world *world, const dt_config *cfg,
                                FILE *metrics, dt_tb *tb)
{
    dt_figure figs[DT_FIGURES_MAX];
    int n = dt_trainer_describe(t, figs, DT_FIGURES_MAX);
    if (n > DT_FIGURES_MAX)
        n = DT_FIGURES_MAX;
    dt_status st = DT_OK;
    if (world->rank == 0 && metrics != NULL && (st = write_record(metrics, cfg, figs, n)) != DT_OK)
        return st;
    if (world->rank == 0 && tb != NULL && (st = write_scalars(tb, figs, n)) != DT_OK)
        return st;
    /* Every rank describes a figure to compare with the communication alone, or none:
     * timing it is a collective. */
    double alone = 0.0;
    for (int i = 0; i < n; i++)
        if (figs[i].flags & DT_FIGURE_VS_ALONE) {
            if ((st = dt_trainer_time_comm_alone(t, 5, &alone)) != DT_OK)
                return st;
            break;
        }
    if (world->rank == 0) {
        char lines[4096];
        format_lines(figs, n, 0, world->rank, alone, lines, sizeof lines);
        if (lines[0] != '\0')
            printf("%s\n", lines);
    }
    /* Every rank's own lines, whether it has any or not (a collective). */
    char mine[DT_CLI_LINE_MAX];
    format_lines(figs, n, DT_FIGURE_EACH_RANK, world->rank, alone, mine, sizeof mine);
    st = dt_cli_print_ranks(world, mine);
    fflush(stdout);
    return st;
}
