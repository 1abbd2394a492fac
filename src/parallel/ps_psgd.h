/* ps_psgd.h (internal) — PowerSGD for the ps strategy's pushes (docs/COMPRESSION.md,
 * "PowerSGD under ps").
 *
 * ddp's PowerSGD sums the factors over the ranks between its two products (gcomp.c). A ps
 * worker has no peer to sum with, so each worker takes the power step on its own gradient,
 * with its own warm-started Q and its own error feedback, per weight matrix M (rows, cols):
 *
 *     M := G + E              (M := G without error feedback)
 *     orthonormalize Q; P := M Q; orthonormalize P; Q := M^T P
 *     A := P Q^T; E := M - A  (what the push does not carry, added to the next step's)
 *
 * and pushes the factors: to each server, the rows of P whose elements fall in that
 * server's shard, and Q whole (a matrix split between two shards sends its Q to both). The
 * server rebuilds those rows of A and keeps the elements of its shard. Biases and matrices
 * whose factors would not be smaller go dense, as under ddp (dt_psgd_worth), and so does the
 * part of a matrix in a shard when its rows' factors would not be smaller than it (then M
 * itself goes, and the residual keeps nothing there): no push is larger than float32's.
 * Q stays this
 * worker's warm start: each worker's Q is its own state, checkpointed per replica.
 *
 * Every worker and server builds the same plan from the model and the shards; a step
 * allocates nothing. */
#ifndef DT_PARALLEL_PS_PSGD_H
#define DT_PARALLEL_PS_PSGD_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/model.h"
#include "dtrain/strategy.h"

typedef struct dt_ps_psgd dt_ps_psgd;

/* The plan for model m split into `servers` shards (shard_off, shard_cnt). A worker
 * (worker = 1) gets its Q, drawn as ddp's first Q, and P; with_residual: room to form
 * A for the residual. A server gets the room to rebuild its pieces. Allocates. */
dt_status dt_ps_psgd_create(const dt_compress_options *o, const dt_model *m, int servers,
                            const size_t *shard_off, const size_t *shard_cnt, int worker,
                            int with_residual, dt_ps_psgd **out);
void dt_ps_psgd_free(dt_ps_psgd *p);

/* The payload bytes of a push to server s. */
size_t dt_ps_psgd_bytes(const dt_ps_psgd *p, int s);

/* Worker, once per step before the pushes: the power step on the gradient g (the model's
 * flat buffer) with the residual e (NULL without error feedback; updated). */
void dt_ps_psgd_factor(dt_ps_psgd *p, const float *g, float *e);
/* Worker: server s's payload into out (dt_ps_psgd_bytes(p, s) bytes): its pieces in flat
 * order, a factored piece as its P rows then Q, a dense piece as its values (g's, or M's
 * where a matrix's residual was added). */
void dt_ps_psgd_write(const dt_ps_psgd *p, int s, const float *g, uint8_t *out);
/* Server s: a payload read back into dense (the shard's count), the shard starting at
 * element off of the flat buffer. */
void dt_ps_psgd_read(dt_ps_psgd *p, int s, size_t off, const uint8_t *in, float *dense);

/* Worker: the Q factors (every matrix's, one after the other) and their count; the count
 * is answered on servers too (NULL there), so that every rank takes part in a gather. */
float *dt_ps_psgd_factors(dt_ps_psgd *p, size_t *count);
/* Worker: after a step whose gradient held NaN or Inf, a matrix's Q that took it in is
 * drawn afresh. */
void dt_ps_psgd_forget_nonfinite(dt_ps_psgd *p);

#endif
