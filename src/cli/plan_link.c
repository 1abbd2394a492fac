/* plan_link.c — the link model of `dtrain plan` (plan_link.h). */
#include "plan_link.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/dtrain.h"

static double number(const cJSON *o, const char *key)
{
    return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* Keeps the rows sorted by size; a size seen twice keeps its first row. */
static void add_point(dt_link_model *l, double size, double seconds)
{
    int i = l->npts;
    for (int k = 0; k < l->npts; k++)
        if (l->size[k] == size)
            return;
    if (l->npts == DT_LINK_POINTS)
        return;
    while (i > 0 && l->size[i - 1] > size) {
        l->size[i] = l->size[i - 1];
        l->time[i] = l->time[i - 1];
        i--;
    }
    l->size[i] = size;
    l->time[i] = seconds;
    l->npts++;
}

/* One row: returns 1 if it is an `auto` all-reduce row with a time, 0 if another row, -1 if
 * its ranks or --gap differ from the rows before it. */
static int take_row(dt_link_model *l, const cJSON *o)
{
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "operation");
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(o, "algorithm");
    const double sz = number(o, "size"), us = number(o, "time_us"), rk = number(o, "ranks");
    const cJSON *gap_item = cJSON_GetObjectItemCaseSensitive(o, "gap_ms");
    const double gap = cJSON_IsNumber(gap_item) ? gap_item->valuedouble : 0.0;
    if (!cJSON_IsString(op) || strcmp(op->valuestring, "allreduce") != 0 || !cJSON_IsString(al) ||
        strcmp(al->valuestring, "auto") != 0 || !(sz > 0) || !(us > 0) || !(rk > 1))
        return 0;
    if (l->npts > 0 && ((int)rk != l->ranks || gap != l->gap_ms))
        return -1;
    l->ranks = (int)rk;
    l->gap_ms = gap;
    add_point(l, sz, us * 1e-6);
    return 1;
}

int dt_plan_link_read(const char *path, double bytes, dt_link_model *l)
{
    char *text = NULL;
    size_t n = 0;
    memset(l, 0, sizeof *l);
    if (dt_read_file(path, "plan", &text, &n) != DT_OK)
        return -1;
    int lineno = 0, mixed = 0;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        lineno++;
        cJSON *o = cJSON_Parse(line);
        if (o != NULL && take_row(l, o) < 0 && mixed == 0)
            mixed = lineno;
        cJSON_Delete(o);
    }
    free(text);
    if (mixed > 0) {
        dt_fail(DT_ERR_FORMAT,
                "plan: %s line %d: all-reduce rows of another rank count or --gap than the "
                "lines before it; give one bench-comm run's output",
                path, mixed);
        return -1;
    }
    if (l->npts == 0) {
        dt_fail(DT_ERR_FORMAT, "plan: %s: no all-reduce rows of algorithm auto (bench-comm --json)",
                path);
        return -1;
    }
    /* α: the smallest message's time is all latency, 2(n-1) of them in a ring. */
    l->alpha = l->time[0] / (2.0 * (l->ranks - 1));
    l->at = bytes;
    l->bw = dt_link_bw_at(l, bytes);
    return 0;
}
