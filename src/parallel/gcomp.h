/* gcomp.h (internal) — compressed gradient exchange over a data-parallel group: what ddp
 * calls instead of a plain all-reduce when parallel.compress is set (docs/COMPRESSION.md).
 *
 * The gradients are the replicas' shares of the global mean (each rank's loss divides by
 * the global batch), so what every mode computes is the SUM over ranks, as the plain
 * all-reduce does:
 *
 *   fp16, bf16   each bucket cast to 16 bits, all-reduced in 16 bits (each addition rounded
 *                to the 16-bit type: comm.h), cast back. No error feedback (as PyTorch's
 *                fp16/bf16 compress hooks).
 *   topk:R       each bucket's accumulated gradient g + e: its ceil(R n) largest entries
 *                (index, value) all-gathered, the bucket rebuilt as the rank-order sum of
 *                every rank's entries (the same bits on every rank); e keeps the rest.
 *   powersgd:K   after backward, every weight matrix M = G + E (rows, cols) as rank-K
 *                factors: P = M Q summed over ranks and orthonormalised, Q = M^T P summed,
 *                the gradient replaced by P Q^T; E := M - P Q^T / N (this rank's share of
 *                what the sum did not carry). Biases and matrices that would not shrink are
 *                summed whole, in the same all-reduce as the P factors.
 *
 * The error-feedback residual e (one float per parameter) and the Q factors are this rank's
 * state across steps. Everything is sized at create: a step allocates nothing. */
#ifndef DT_PARALLEL_GCOMP_H
#define DT_PARALLEL_GCOMP_H

#include "dtrain/comm.h"
#include "dtrain/model.h"
#include "dtrain/strategy.h"

typedef struct dt_gcomp dt_gcomp;

/* A bucket: a contiguous range of the flat gradient buffer. */
typedef struct dt_gcomp_bucket {
    size_t offset, count;
} dt_gcomp_bucket;

/* Plans the exchange of model m's gradients in `nbuckets` buckets over `comm` (borrowed,
 * as m is) for o->kind != NONE. Allocates. */
dt_status dt_gcomp_create(const dt_compress_options *o, dt_comm *comm, const dt_model *m,
                          const dt_gcomp_bucket *buckets, int nbuckets, dt_gcomp **out);
void dt_gcomp_free(dt_gcomp *g);

/* 1 when buckets are exchanged one by one as backward produces them (fp16, bf16, topk); 0
 * when the whole gradient goes at once after backward (powersgd). */
int dt_gcomp_per_bucket(const dt_gcomp *g);

/* Per bucket: start bucket b's exchange from the gradients `grads` (the model's flat
 * buffer); after *req completed, finish writes the summed gradient into the bucket. */
dt_status dt_gcomp_start(dt_gcomp *g, float *grads, int b, dt_comm_req **req);
void dt_gcomp_finish(dt_gcomp *g, float *grads, int b);

/* powersgd: the whole exchange, blocking (collective over the group). */
dt_status dt_gcomp_run(dt_gcomp *g, float *grads);

/* Bytes this rank sends per step into the group's collectives (what an all-reduce or
 * all-gather is given), and what the uncompressed float32 gradient would be. */
size_t dt_gcomp_wire_bytes(const dt_gcomp *g);

/* The error-feedback residual (NULL when the mode keeps none) and its length. */
float *dt_gcomp_residual(dt_gcomp *g, size_t *count);
/* After a step skipped for a NaN or Inf: the residual's entries that took it in are zeroed,
 * and PowerSGD's factors drawn afresh if they did, so that one bad step does not poison
 * every later one (a NaN in e would be sent again at every step). */
void dt_gcomp_forget_nonfinite(dt_gcomp *g);

/* PowerSGD's Q factors, every matrix's one after the other (NULL and 0 otherwise): the
 * same on every rank. */
float *dt_gcomp_factors(dt_gcomp *g, size_t *count);

#endif
