/* obs.h — what a rank spent its time on: per-phase timers that are always on (a clock read
 * at each phase boundary), and, when asked for, a buffer of timed events (phases per
 * micro-batch, every collective with its bytes and algorithm, every step) for a trace.
 *
 * Recording only: no file formats and no communication here (the trainer gathers the ranks'
 * figures and writes the trace: train.h). The event buffer is sized once; a full buffer
 * drops further events and counts them, so a step never allocates. Every function accepts a
 * NULL recorder and then does nothing. Not thread-safe: one recorder per rank, fed from the
 * thread that runs the step. */
#ifndef DTRAIN_OBS_H
#define DTRAIN_OBS_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_phase {
    DT_PHASE_DATA = 0, /* loading and converting samples (and a --slow-rank delay) */
    DT_PHASE_FORWARD,  /* forward passes and the loss */
    DT_PHASE_BACKWARD, /* backward passes (tensor-parallel collectives inside included) */
    DT_PHASE_COMM,     /* waiting for the step's gradient communication and exchanges */
    DT_PHASE_OPTIM,    /* the optimizer's update */
    DT_PHASE_BUBBLE,   /* a pipeline stage waiting for another stage's messages */
    DT_PHASE_COUNT
} dt_phase;

/* "data", "forward", "backward", "comm", "optimizer", "bubble"; NULL out of range. */
DT_API const char *dt_phase_name(dt_phase p);

typedef enum dt_obs_kind {
    DT_OBS_PHASE = 0, /* a phase of one micro-batch (or of the step) */
    DT_OBS_COLL,      /* a collective or message, from its start to its completion */
    DT_OBS_STEP       /* a whole optimizer step */
} dt_obs_kind;

typedef struct dt_obs_event {
    double t0, t1; /* dt_now() seconds on this rank's clock */
    dt_obs_kind kind;
    int what;         /* PHASE: the dt_phase */
    int micro;        /* PHASE: the micro-batch, or -1 */
    int64_t step;     /* the step it belongs to (1-based steps attempted) */
    uint64_t bytes;   /* COLL: bytes of the operation */
    const char *name; /* COLL: the operation ("allreduce"); a static string */
    const char *algo; /* COLL: the algorithm ("ring"); a static string */
    char group[24];   /* COLL: the communicator's name ("dp") */
} dt_obs_event;

typedef struct dt_obs dt_obs;

/* A recorder keeping up to max_events events (0: the phase totals only). */
DT_API dt_status dt_obs_create(size_t max_events, dt_obs **out);
DT_API void dt_obs_free(dt_obs *o);

/* The step that events belong to from now on. */
DT_API void dt_obs_set_step(dt_obs *o, int64_t step);
/* Adds [t0, t1) to phase p's total (and as an event of micro-batch `micro`). */
DT_API void dt_obs_phase(dt_obs *o, dt_phase p, double t0, double t1, int micro);
/* dt_obs_phase of a phase p inside phase `outer`, which is recorded whole when it ends (a
 * blocking collective inside forward: ZeRO-3's gathers): [t0, t1) counts to p and not to
 * outer, so that the phases' totals still add up to the step. */
DT_API void dt_obs_phase_inside(dt_obs *o, dt_phase p, dt_phase outer, double t0, double t1,
                                int micro);
/* A collective or message from t0 to t1: an event, and the part of [t0, t1] that no other
 * operation of the step covered added to the time communication was in flight
 * (dt_obs_inflight). */
DT_API void dt_obs_coll(dt_obs *o, const char *name, const char *group, const char *algo,
                        uint64_t bytes, double t0, double t1);
/* A whole step (an event only). */
DT_API void dt_obs_step(dt_obs *o, double t0, double t1);

DT_API double dt_obs_total(const dt_obs *o, dt_phase p);
/* Seconds during which at least one operation was in flight: the union of their spans
 * within each step (operations in flight together count once). */
DT_API double dt_obs_inflight(const dt_obs *o);
DT_API size_t dt_obs_count(const dt_obs *o);
DT_API const dt_obs_event *dt_obs_get(const dt_obs *o, size_t i);
/* Events that did not fit. */
DT_API uint64_t dt_obs_dropped(const dt_obs *o);

#ifdef __cplusplus
}
#endif
#endif
