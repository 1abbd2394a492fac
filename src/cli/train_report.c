/* train_report.c — the phase table and the straggler at the end of `dtrain train`
 * (train_report.h). */
#include <cjson/cJSON.h>
#include <stdio.h>

#include "cli/train_report.h"

/* One process: each phase's time per step and nothing else (no rank to compare, nothing in
 * flight between ranks). */
static void print_one(const dt_phase_report *r)
{
    printf("dtrain: time per step by phase over %lld steps (ms):\n", (long long)r->steps);
    for (int p = 0; p < DT_PHASE_COUNT; p++)
        if (r->max_s[p] > 0.0) /* a phase this run has */
            printf("  %-10s %9.3f\n", dt_phase_name((dt_phase)p), r->mean_s[p] * 1e3);
}

static void print_table(const dt_phase_report *r)
{
    if (r->ranks == 1) {
        print_one(r);
        return;
    }
    printf("dtrain: time per step by phase over %lld steps (ms; mean over the %d ranks, the "
           "largest, and whose):\n",
           (long long)r->steps, r->ranks);
    printf("  %-10s %9s %9s  %s\n", "phase", "mean", "max", "slowest");
    for (int p = 0; p < DT_PHASE_COUNT; p++) {
        if (r->max_s[p] <= 0.0)
            continue; /* a phase this layout never has (bubble without a pipeline) */
        printf("  %-10s %9.3f %9.3f  rank %d\n", dt_phase_name((dt_phase)p), r->mean_s[p] * 1e3,
               r->max_s[p] * 1e3, r->slowest[p]);
    }
    const double waited = r->mean_s[DT_PHASE_COMM];
    if (r->inflight_s > 0.0)
        printf("  communication in flight %.3f ms per step, %.3f ms of it waited for: about "
               "%.3f ms hidden behind computation\n",
               r->inflight_s * 1e3, waited * 1e3,
               (r->inflight_s > waited ? r->inflight_s - waited : 0.0) * 1e3);
    printf("dtrain: straggler: rank %d, %.3f ms of computation per step (data, forward, "
           "backward, optimizer) against %.3f ms on the other ranks (%.2fx)\n",
           r->straggler, r->straggler_compute_s * 1e3, r->others_compute_s * 1e3,
           r->others_compute_s > 0 ? r->straggler_compute_s / r->others_compute_s : 0.0);
}

static void write_record(FILE *f, const dt_phase_report *r)
{
    cJSON *o = cJSON_CreateObject(), *ranks = cJSON_AddArrayToObject(o, "ranks");
    cJSON_AddStringToObject(o, "event", "phases");
    cJSON_AddNumberToObject(o, "steps", (double)r->steps);
    cJSON_AddNumberToObject(o, "straggler", r->straggler);
    for (int k = 0; k < r->ranks; k++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "rank", k);
        for (int p = 0; p < DT_PHASE_COUNT; p++) {
            char key[32];
            snprintf(key, sizeof key, "%s_ms", dt_phase_name((dt_phase)p));
            cJSON_AddNumberToObject(x, key, r->per_rank[k * (DT_PHASE_COUNT + 1) + p] * 1e3);
        }
        cJSON_AddNumberToObject(x, "comm_in_flight_ms",
                                r->per_rank[k * (DT_PHASE_COUNT + 1) + DT_PHASE_COUNT] * 1e3);
        cJSON_AddItemToArray(ranks, x);
    }
    char *s = cJSON_PrintUnformatted(o);
    if (s != NULL) {
        fprintf(f, "%s\n", s);
        fflush(f);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

dt_status dt_cli_report_phases(dt_trainer *t, int rank, FILE *metrics, dt_tb *tb)
{
    dt_phase_report r;
    dt_status st = dt_trainer_phase_report(t, &r);
    if (st != DT_OK || rank != 0 || r.steps == 0)
        return st;
    print_table(&r);
    if (metrics != NULL)
        write_record(metrics, &r);
    for (int p = 0; tb != NULL && p < DT_PHASE_COUNT; p++) {
        char tag[48];
        snprintf(tag, sizeof tag, "phases/%s_ms", dt_phase_name((dt_phase)p));
        st = dt_tb_scalar(tb, tag, r.steps, r.mean_s[p] * 1e3);
        if (st != DT_OK)
            return st;
    }
    fflush(stdout);
    return DT_OK;
}
