/* compress.h (internal) — the arithmetic of gradient compression: top-k sparsification with
 * error feedback, and PowerSGD's rank-r power step. Never installed.
 *
 * Every function here is a kernel: raw pointers plus sizes, shapes in its comment, no
 * state, no allocation (the caller sizes its buffers once; a training step never mallocs),
 * no communication (the strategy runs the all-reduces between the calls), and the same bits
 * on every call with the same inputs. The loops of this file are sequential with a fixed
 * order of operations (sums in double); the products are cblas_sgemm (P = M Q: dt_sgemm_nn,
 * tensor/gemm.h), whose bits depend only on the BLAS build, its kernel set and its thread
 * count: dtrain runs OpenBLAS
 * single-threaded (docs/ARCHITECTURE.md, "Threads"), which is deterministic. Ranks on CPUs
 * for which OpenBLAS picks different kernels (OPENBLAS_CORETYPE) may round a product
 * differently; the strategy decides whether that matters where ranks must agree.
 * Programmer misuse (a size out of range) trips DT_ASSERT; a ratio or a rank from a user's
 * config is to be checked by the config, with a message, before it reaches these.
 *
 * Top-k with error feedback (Stich, Cordonnier and Jaggi, "Sparsified SGD with memory",
 * NeurIPS 2018; Karimireddy et al., "Error feedback fixes SignSGD and other gradient
 * compression schemes", ICML 2019). Per gradient range g (n) with its residual e (n), zero
 * at the start, each step:
 *
 *     k = dt_topk_count(n, ratio)                   (once, when sizing the buffers)
 *     dt_topk_feedback(g, e, n, k, idx, val, scratch)   e := g + e; send its top k; zero them
 *     exchange (idx, val) with the other ranks (an all-gather: ranks pick different indices)
 *     dense := 0; dt_sparse_add(dense, idx_r, val_r, k) for every rank r's pair
 *
 * and `dense`, scaled as the strategy averages, replaces the gradient. What was not sent
 * stays in e and is added to the next step's gradient, so no coordinate is lost, only late.
 *
 * PowerSGD (Vogels, Karimireddy and Jaggi, "PowerSGD: practical low-rank gradient
 * compression for distributed optimization", NeurIPS 2019, Algorithm 1 with error feedback;
 * as PyTorch's powerSGD_hook with warm start and without its start_powerSGD_iter warm-up).
 * Per weight viewed as a matrix (rows, cols) — a Linear weight (out, in), a Conv2d weight
 * (C_out, C_in*kH*kW) — with its residual E (rows, cols), zero at the start, and its
 * warm-started Q (cols, r) drawn once by dt_psgd_init_q with the same seed and stream on
 * every rank:
 *
 *     M := G + E                                 this rank's gradient plus what it kept
 *     dt_psgd_orthonormalize(Q, cols, r)         as PyTorch does to the warm-started Q
 *     dt_psgd_p(M, rows, cols, Q, r, P)          P (rows, r) = M Q
 *     all-reduce P (sum over ranks)
 *     dt_psgd_orthonormalize(P, rows, r)         every rank, the same bits in and out
 *     dt_psgd_q(M, rows, cols, P, r, Q)          Q (cols, r) = M^T P
 *     all-reduce Q (sum), then Q /= world size   the mean gradient's factor
 *     dt_psgd_approx(P, Q, rows, cols, r, A)     A (rows, cols) = P Q^T, the same on all ranks
 *     E := M - A                                 kept per rank, as PyTorch's hook does
 *     A replaces the gradient.
 *
 * Vogels et al. keep instead each rank's own residual, M - P Q_w^T with Q_w this rank's
 * M^T P before the all-reduce (orthogonal to P's columns); summed over ranks the two
 * residuals are the same. Q keeps its value for the next step (the warm start: one power
 * iteration per step refines the previous subspace). Biases, and matrices where
 * dt_psgd_worth says the factors would not be smaller, are all-reduced whole. r should be
 * dt_psgd_rank(rows, cols, r_asked), PyTorch's min(rows, cols, r); the orthonormalization
 * needs r <= rows for P and r <= cols for Q. */
#ifndef DT_PARALLEL_COMPRESS_H
#define DT_PARALLEL_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

/* ---- top-k ---------------------------------------------------------------------------- */

/* k for n elements and a fraction `ratio` in (0, 1] (asserted; n >= 1): ceil(ratio * n)
 * clamped to [1, n]. The product is taken with a relative slack of 1e-12, so a ratio
 * written in decimal keeps its decimal meaning: 0.07 of 100 is 7, although the double
 * nearest 0.07 times 100 is 7.000000000000001. */
size_t dt_topk_count(size_t n, double ratio);

/* The k entries of x (n) with the largest magnitude, 1 <= k <= n < 2^32 (asserted):
 * idx (k) their indices in ascending order, val (k) their values x[idx[j]] (sign and all).
 * Ties in |x| go to the lower index; -0 and +0 tie. NaN ranks above every number, +-inf
 * next, so a poisoned gradient is always among the k and never silently dropped (NaNs with
 * different payloads rank by payload bits, then index). scratch (n) is workspace; its
 * contents on entry do not matter. x may not overlap idx, val or scratch.
 * Worst case O(n) whatever the data: a three-digit radix select on the magnitudes' bits
 * (compress.c says why not quickselect). */
void dt_topk_select(const float *x, size_t n, size_t k, uint32_t *idx, float *val,
                    uint32_t *scratch);

/* Error feedback over g (n) and the residual e (n): e := g + e (in float, element by
 * element), then idx/val (k) := dt_topk_select of the new e, then e[idx[j]] := 0. So
 * exactly, bit for bit: val[j] == g[i] + e_before[i] for i = idx[j] (and e_after[i] == +0),
 * and e_after[i] == g[i] + e_before[i] at every other i: what is sent plus what is kept is
 * the accumulated gradient. Same bounds and scratch as dt_topk_select; g may not overlap
 * e. */
void dt_topk_feedback(const float *g, float *e, size_t n, size_t k, uint32_t *idx, float *val,
                      uint32_t *scratch);

/* dense[idx[j]] += val[j] for j in [0, k), in order of j (indices may repeat). */
void dt_sparse_add(float *dense, const uint32_t *idx, const float *val, size_t k);

/* ---- PowerSGD ------------------------------------------------------------------------- */

/* The seed of PowerSGD's first Q: a constant, so that every rank draws the same factors
 * without a message (ddp's ranks, and ps's workers at their start); each matrix is its own
 * stream (its index among the factored matrices). */
#define DT_PSGD_Q_SEED 0x706f7765725347ULL

/* q (cols, r) := standard normal deviates, a pure function of (seed, stream, element), so
 * every rank that passes the same seed and stream draws the same Q. The stream tells
 * tensors (and re-draws) apart; stream < 2^56 (asserted). Element e = i*r + j is
 *   w = Philox4x32-10(key = seed, counter = (e mod 2^32, e div 2^32, stream mod 2^32,
 *                     6 << 24 | stream div 2^32)),
 *   q[e] = (float) (sqrt(-2 ln u1) cos(2 pi u2)),  u1 = (w0 + 1) / 2^32, u2 = w1 / 2^32,
 * Box and Muller's transform in double (6 sits beside the tags of dt_rng_stream). Not
 * torch.randn's numbers. */
void dt_psgd_init_q(float *q, int64_t cols, int r, uint64_t seed, uint64_t stream);

/* P (rows, r) = M (rows, cols) @ Q (cols, r); row-major, dt_sgemm_nn (for r < 16 our own
 * loop: OpenBLAS's AVX-512 kernels would malloc on every call, tensor/gemm.h). */
void dt_psgd_p(const float *m, int64_t rows, int64_t cols, const float *q, int r, float *p);

/* Orthonormalizes the r columns of p (rows, r) in place, 1 <= r <= rows (asserted): Gram-
 * Schmidt in column order, PyTorch's _orthogonalize_gram_schmidt with epsilon 0 (column i
 * loses its components along columns 0..i-1, then is scaled to norm 1), plus a second
 * projection pass (Kahan's "twice is enough": B. N. Parlett, "The Symmetric Eigenvalue
 * Problem", SIAM 1998), so that columns left nearly dependent — a gradient of rank below r
 * — still come out orthogonal to float precision. Sums in double. A column that is 0 after its
 * projections (M = 0), or that the second pass shows to be dependent on the earlier columns to
 * working precision (it loses more than half its square norm there: Kahan's test), is set to +0: no
 * 0/0, and P^T P is I except a 0 on that column's diagonal. With warm start the next Q then has
 * that column 0 too; the strategy may re-draw Q to bring the direction back. A column holding inf
 * or NaN is set to NaN throughout, so the poison reaches the approximation instead of vanishing;
 * the columns after it ignore it. */
void dt_psgd_orthonormalize(float *p, int64_t rows, int r);

/* Q (cols, r) = M^T (cols, rows) @ P (rows, r), for m (rows, cols); cblas_sgemm. */
void dt_psgd_q(const float *m, int64_t rows, int64_t cols, const float *p, int r, float *q);

/* out (rows, cols) = P (rows, r) @ Q^T (r, cols); cblas_sgemm. out's contents on entry are
 * not read (beta = 0). */
void dt_psgd_approx(const float *p, const float *q, int64_t rows, int64_t cols, int r, float *out);

/* 1 when the factors are smaller than the matrix, (rows + cols) * r < rows * cols, so the
 * matrix is worth compressing; 0 when it is sent whole (PyTorch's _should_compress with
 * min_compression_rate 1). Dimensions >= 1, r >= 1. */
int dt_psgd_worth(int64_t rows, int64_t cols, int r);

/* The rank to use: min(r, rows, cols) (PyTorch's powerSGD_hook clamps the same way). */
int dt_psgd_rank(int64_t rows, int64_t cols, int r);

/* Whether a tensor of `ndim` dimensions, the first `shape0`, `count` elements is sent as
 * rank-r_asked factors: 2-D and up, viewed as (shape0, count / shape0), with
 * dt_psgd_rank's r, where dt_psgd_worth says so. 1 with *rows, *cols, *r set, or 0. The one
 * rule of ddp's and ps's plans, so that their Q factors line up. */
int dt_psgd_view(int ndim, int64_t shape0, size_t count, int r_asked, int64_t *rows, int64_t *cols,
                 int *r);

/* A Q (cols, r) that holds NaN or Inf is drawn afresh (dt_psgd_init_q with seed and
 * stream), after a step skipped for one: a poisoned warm start would poison every later
 * step. Returns 1 when it was redrawn. */
int dt_psgd_redraw_nonfinite(float *q, int64_t cols, int r, uint64_t seed, uint64_t stream);

#endif
