/* trace.c — the trainer's view of where the time went (train.h): every rank's phase times
 * gathered into a straggler report, and the ranks' trace events merged into one Chrome
 * trace-event file (docs/USER_GUIDE.md shows how to read both).
 *
 * One clock: dt_trainer_run starts with a barrier, and each rank takes its clock right
 * after it as zero, so every rank's timestamps count from the same instant, give or take
 * how unevenly the barrier releases the ranks (microseconds on one machine, a network
 * latency across hosts). Each rank formats its own events; rank 0 gathers the text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "train/trainer_internal.h"

#define PHASE_COLS (DT_PHASE_COUNT + 1)

dt_status dt_trainer_sync_clock(dt_trainer *t)
{
    dt_status st = dt_comm_barrier(dt_strategy_world(t->strategy));
    t->clock_zero = dt_now();
    return st;
}

void dt_trainer_set_delay(dt_trainer *t, double seconds)
{
    t->delay_s = seconds;
}

void dt_trainer_set_jitter(dt_trainer *t, double mean_seconds)
{
    t->jitter_s = mean_seconds;
}

dt_status dt_trainer_enable_trace(dt_trainer *t, size_t max_events)
{
    dt_obs *o = NULL;
    dt_status st = dt_obs_create(max_events, &o);
    if (st != DT_OK)
        return st;
    dt_strategy_set_obs(t->strategy, o);
    dt_obs_free(t->obs);
    t->obs = o;
    return DT_OK;
}

/* The report's figures from every rank's row of seconds per step; the straggler is sought
 * among the first `computing` ranks (under ps the servers, the last ranks, compute no
 * samples: their optimizer time is not a straggler's). */
static void summarise(const double *rows, int ranks, int computing, dt_phase_report *out)
{
    double most = -1.0, sum = 0.0;
    for (int p = 0; p < DT_PHASE_COUNT; p++) {
        out->mean_s[p] = 0.0;
        out->max_s[p] = -1.0;
        for (int r = 0; r < ranks; r++) {
            const double v = rows[r * PHASE_COLS + p];
            out->mean_s[p] += v / ranks;
            if (v > out->max_s[p]) {
                out->max_s[p] = v;
                out->slowest[p] = r;
            }
        }
    }
    out->inflight_s = 0.0;
    for (int r = 0; r < ranks; r++) {
        const double *x = rows + r * PHASE_COLS;
        const double c =
            x[DT_PHASE_DATA] + x[DT_PHASE_FORWARD] + x[DT_PHASE_BACKWARD] + x[DT_PHASE_OPTIM];
        out->inflight_s += x[DT_PHASE_COUNT] / ranks;
        if (r >= computing)
            continue;
        sum += c;
        if (c > most) {
            most = c;
            out->straggler = r;
        }
    }
    out->straggler_compute_s = most;
    out->others_compute_s = computing > 1 ? (sum - most) / (computing - 1) : 0.0;
}

dt_status dt_trainer_phase_report(dt_trainer *t, dt_phase_report *out)
{
    dt_status st = DT_OK;
    dt_comm *world = dt_strategy_world(t->strategy);
    const int ranks = dt_comm_size(world);
    const int64_t steps = t->attempted > 0 ? t->attempted : 1;
    double mine[PHASE_COLS];
    memset(out, 0, sizeof *out);
    if (t->phases == NULL)
        DT_TRY(dt_alloc(sizeof(double) * PHASE_COLS * (size_t)ranks, "phase report",
                        (void **)&t->phases));
    for (int p = 0; p < DT_PHASE_COUNT; p++)
        mine[p] = dt_obs_total(t->obs, (dt_phase)p) / (double)steps;
    mine[DT_PHASE_COUNT] = dt_obs_inflight(t->obs) / (double)steps;
    DT_TRY(dt_comm_allgather(world, mine, t->phases, PHASE_COLS, DT_COMM_FLOAT64));
    out->ranks = ranks;
    out->steps = t->attempted;
    out->per_rank = t->phases;
    summarise(t->phases, ranks, dt_strategy_get_info(t->strategy)->computing, out);
fail:
    return st;
}

/* ---- the trace ---- */

/* One event as a complete ("X") event of the Chrome trace-event format: microseconds from
 * the common zero; the compute track is thread 0, communication thread 1. */
static void add_event(dt_strbuf *b, const dt_obs_event *e, int rank, double zero)
{
    const double ts = (e->t0 - zero) * 1e6, dur = (e->t1 - e->t0) * 1e6;
    if (e->kind == DT_OBS_STEP)
        dt_strbuf_addf(
            b,
            ",\n{\"name\":\"step %lld\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,"
            "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%lld}}",
            (long long)e->step, rank, ts, dur, (long long)e->step);
    else if (e->kind == DT_OBS_PHASE)
        dt_strbuf_addf(b,
                       ",\n{\"name\":\"%s\",\"cat\":\"phase\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,"
                       "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%lld,\"micro_batch\":%d}}",
                       dt_phase_name((dt_phase)e->what), rank, ts, dur, (long long)e->step,
                       e->micro);
    else
        dt_strbuf_addf(b,
                       ",\n{\"name\":\"%s\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,"
                       "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"group\":\"%s\",\"bytes\":%llu,"
                       "\"algorithm\":\"%s\",\"step\":%lld}}",
                       e->name != NULL ? e->name : "?", rank, ts, dur, e->group,
                       (unsigned long long)e->bytes, e->algo != NULL ? e->algo : "?",
                       (long long)e->step);
}

/* This rank's part of the file: its track names, then its events. */
static void format_rank(const dt_trainer *t, int rank, dt_strbuf *b)
{
    dt_strbuf_addf(b,
                   ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":"
                   "\"rank %d\"}}",
                   rank, rank);
    dt_strbuf_addf(b,
                   ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":"
                   "{\"sort_index\":%d}}",
                   rank, rank);
    for (int tid = 0; tid < 2; tid++)
        dt_strbuf_addf(b,
                       ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":"
                       "{\"name\":\"%s\"}}",
                       rank, tid, tid == 0 ? "compute" : "communication");
    for (size_t i = 0; i < dt_obs_count(t->obs); i++)
        add_event(b, dt_obs_get(t->obs, i), rank, t->clock_zero);
}

/* Every rank's text to every rank (sizes first), rank 0 writes the file. */
static dt_status gather_write(dt_trainer *t, const dt_strbuf *mine, const char *path,
                              uint64_t dropped)
{
    dt_status st = DT_OK;
    dt_comm *world = dt_strategy_world(t->strategy);
    const int ranks = dt_comm_size(world);
    int64_t *sizes = NULL, n = (int64_t)mine->n;
    size_t *counts = NULL, *displs = NULL, total = 0;
    char *all = NULL;
    DT_TRY(dt_alloc(sizeof *sizes * (size_t)ranks, "trace", (void **)&sizes));
    DT_TRY(dt_alloc(sizeof *counts * (size_t)ranks, "trace", (void **)&counts));
    DT_TRY(dt_alloc(sizeof *displs * (size_t)ranks, "trace", (void **)&displs));
    DT_TRY(dt_comm_allgather(world, &n, sizes, 1, DT_COMM_INT64));
    for (int r = 0; r < ranks; r++) {
        counts[r] = (size_t)sizes[r];
        displs[r] = total;
        total += counts[r];
    }
    const char head[] = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
                        "{\"name\":\"clock\",\"ph\":\"M\",\"pid\":0,\"args\":{\"zero\":"
                        "\"the ranks' common instant after a barrier\"}}";
    char tail[160];
    const int nt = snprintf(tail, sizeof tail, "\n],\"otherData\":{\"dropped_events\":%llu}}\n",
                            (unsigned long long)dropped);
    DT_TRY(dt_alloc(sizeof head + total + (size_t)nt, "trace", (void **)&all));
    memcpy(all, head, sizeof head - 1);
    DT_TRY(
        dt_comm_allgatherv(world, mine->s, all + sizeof head - 1, counts, displs, DT_COMM_UINT8));
    memcpy(all + sizeof head - 1 + total, tail, (size_t)nt);
    if (dt_comm_rank(world) == 0)
        st = dt_write_file_atomic(path, "trace", all, sizeof head - 1 + total + (size_t)nt);
fail:
    dt_free(sizes);
    dt_free(counts);
    dt_free(displs);
    dt_free(all);
    return st;
}

dt_status dt_trainer_write_trace(dt_trainer *t, const char *path)
{
    dt_comm *world = dt_strategy_world(t->strategy);
    dt_strbuf b = {0};
    format_rank(t, dt_comm_rank(world), &b);
    /* Every rank takes part in the gathers even when its own text failed: the status
     * decides afterwards, and nobody waits alone. */
    uint64_t dropped = dt_obs_dropped(t->obs), all_dropped = 0;
    dt_status st = dt_comm_allreduce(world, &dropped, &all_dropped, 1, DT_COMM_INT64, DT_COMM_SUM);
    const dt_strbuf empty = {.s = (char *)"", .n = 0};
    if (st == DT_OK)
        st = gather_write(t, b.failed ? &empty : &b, path, all_dropped);
    if (st == DT_OK && b.failed)
        st = dt_fail(DT_ERR_NOMEM, "trace: rank %d could not format its events",
                     dt_comm_rank(world));
    dt_strbuf_free(&b);
    return st;
}
