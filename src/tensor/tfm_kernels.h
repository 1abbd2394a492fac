/* tfm_kernels.h — the transformer's kernels (GPT-2: LayerNorm, GELU-tanh, token + position
 * embedding, causal self-attention) on raw pointers plus shape integers, float32 data. No
 * state, no allocation: the layers own the buffers (and the attention's workspace) and call
 * these. Each comment gives the shapes and says which outputs are written (every element,
 * whatever the buffer held) and which are accumulated (+=).
 *
 * Threading is the caller's: every function touches only what its arguments name, so a layer
 * may run one call per thread on disjoint outputs (rows, or (sequence, head) pairs for the
 * attention); the accumulated parameter gradients (LayerNorm's dg/db, the embeddings') need
 * one buffer per thread or one thread per tensor. */
#ifndef DT_TENSOR_TFM_KERNELS_H
#define DT_TENSOR_TFM_KERNELS_H

#include <stdint.h>

/* ---- LayerNorm over the last dimension (layernorm.c) ---------------------------------- */

/* y (rows, n) = (x - mean) * rstd * g + b per row of x (rows, n), with g, b (n), written;
 * mean (rows) and rstd (rows) = 1 / sqrt(var + eps) written for the backward. var is the
 * biased variance (divided by n, as torch.nn.LayerNorm), mean and var computed in double over
 * two passes, so rows with a large common offset stay accurate. n >= 1; y may not overlap x. */
void dt_layernorm_forward(const float *restrict x, const float *restrict g, const float *restrict b,
                          int64_t rows, int64_t n, float eps, float *restrict y,
                          float *restrict mean, float *restrict rstd);

/* From dy (rows, n) and the forward's x, mean, rstd and g: dx (rows, n) written; dg (n) +=
 * sum over rows of dy * xhat and db (n) += sum over rows of dy, rows in order (xhat = (x -
 * mean) * rstd). dx may not overlap the inputs. */
void dt_layernorm_backward(const float *restrict dy, const float *restrict x,
                           const float *restrict mean, const float *restrict rstd,
                           const float *restrict g, int64_t rows, int64_t n, float *restrict dx,
                           float *restrict dg, float *restrict db);

/* ---- GELU, tanh approximation (gelu.c) ------------------------------------------------- */

/* y (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for x (n): GPT-2's "gelu_new",
 * torch's gelu(approximate='tanh'). Written; y may equal x (in place). */
void dt_gelu_tanh_forward(const float *x, int64_t n, float *y);

/* dx (n) = dy * gelu'(x) from dy (n) and the forward's input x (n). Written; dx may equal
 * dy (in place), not x. */
void dt_gelu_tanh_backward(const float *dy, const float *x, int64_t n, float *dx);

/* Both at once from one tanh per element: y (n) = gelu(x) and d (n) = gelu'(x), the bits of
 * dt_gelu_tanh_forward's y and of dt_gelu_tanh_backward's dx for dy = 1. Written; d may equal
 * x (each element is read before either output is written), y may not overlap x or d. A
 * backward that needs both (the block's, which recomputes y for c_proj's weight gradient)
 * pays one tanh instead of two. */
void dt_gelu_tanh_both(const float *x, int64_t n, float *y, float *d);

/* ---- token + position embedding (embedding.c) ------------------------------------------ */

/* out (T, E) = wte[tok[t]] + wpe[pos0 + t] for t < T: rows of the token table wte (V, E)
 * and of the position table wpe (P, E). Written. Tokens are int32, as the loss's labels are
 * (include/dtrain/loss.h), so one buffer holds a window's inputs and, shifted by one, its
 * targets; the caller checks 0 <= tok[t] < V and pos0 + T <= P. pos0 is the first position
 * (0 for a training window; a generation step with a key-value cache passes the number of
 * tokens already cached). */
void dt_embedding_forward(const int32_t *restrict tok, int64_t T, int64_t E, int64_t pos0,
                          const float *restrict wte, const float *restrict wpe,
                          float *restrict out);

/* dwte[tok[t]] += dy[t] and dwpe[pos0 + t] += dy[t] for dy (T, E), t in increasing order (a
 * token repeated in the window adds its rows in that order: deterministic). Either table's
 * gradient may be NULL (not wanted). */
void dt_embedding_backward(const int32_t *restrict tok, int64_t T, int64_t E, int64_t pos0,
                           const float *restrict dy, float *restrict dwte, float *restrict dwpe);

/* ---- causal self-attention, FlashAttention-style (attention.c) --------------------------- */

/* Rows and columns of the blocks the attention works on: queries and keys in blocks of
 * DT_ATTN_TILE, so a block boundary falls inside T from T = DT_ATTN_TILE + 1 on. */
enum { DT_ATTN_TILE = 64 };

/* Dropout on the attention probabilities. Element (h, i, j) (head, query, key) is kept when
 * dt_u01f(word) >= p, word j mod 4 of dt_philox(sub, i, j / 4, h, 0), where the sub-key sub
 * = w[0] | w[1] << 32 of w = dt_philox(seed, ctr[0], ctr[1], ctr[2], ctr[3]): a pure function
 * of (seed, ctr, h, i, j), so the backward redraws the forward's mask without storing it.
 * The caller's counters say which draw this is (e.g. step, sequence, layer, and a tag that
 * keeps it apart from the other uses of the seed). Kept probabilities are scaled by
 * 1 / (1 - p); lse stays that of the undropped softmax (as in FlashAttention). */
typedef struct dt_attn_dropout {
    double p; /* in [0, 1); 0 draws nothing */
    uint64_t seed;
    uint32_t ctr[4];
    uint32_t h0; /* added to the head index in the keys: a tensor-parallel rank's first head
                  * in the whole model, so its heads draw the whole model's masks (0) */
} dt_attn_dropout;

/* The element's keep decision as described above (the kernels draw 4 keys per Philox call;
 * this is the same decision one at a time, for tests and tools). */
int dt_attn_keep(const dt_attn_dropout *d, int64_t h, int64_t i, int64_t j);

/* Floats of workspace one call of dt_attn_forward or dt_attn_backward needs (per thread:
 * two calls at once need two workspaces), for sequence length T and head dimension D:
 * 2 DT_ATTN_TILE^2 + DT_ATTN_TILE D + T + 2 T D (two blocks of scores, one product, D_i, the
 * head's k^T and v^T), each part rounded up to 16 floats; no T x T matrix. 45,312 floats
 * (177 KiB) at T = 256, D = 64. */
int64_t dt_attn_ws_count(int64_t T, int64_t D);

/* Causal attention of head h (0 <= h < H) of one sequence, after Dao et al. 2022,
 * "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness", Algorithm 1
 * (forward), with the query blocks outermost (one pass over the keys per query block).
 * qkv (T, 3E) is the fused projection's output: q = columns [0, E), k = [E, 2E),
 * v = [2E, 3E); head h owns columns h D .. h D + D - 1 of each, D = E / H (E a multiple of
 * H). s_ij = scale (q_i . k_j) for j <= i (scale = 1 / sqrt(D) in GPT-2), P = softmax_j(s),
 * y_i = sum_j P_ij v_j (dropped as `drop` says; NULL or p = 0: no dropout).
 * Written: head h's columns of y (T, E) and row h of lse (H, T), lse[h][i] = log sum_{j<=i}
 * exp(s_ij). Nothing else of y or lse is touched, so calls for the heads of one sequence
 * may run at once. ws: dt_attn_ws_count(T, D) floats, this call's alone. T >= 1. */
void dt_attn_forward(const float *restrict qkv, int64_t T, int64_t E, int64_t H, int64_t h,
                     float scale, const dt_attn_dropout *drop, float *restrict y,
                     float *restrict lse, float *restrict ws);

/* The backward of dt_attn_forward for head h (Algorithm 2 of the same paper): from dy (T, E)
 * and the forward's qkv, y and lse (and the same scale and drop), recomputes P one block of
 * keys and queries at a time from lse and writes head h's columns of dq, dk and dv into
 * dqkv (T, 3E) (the layout of qkv): written, not accumulated; nothing else of dqkv is
 * touched. Uses D_i = rowsum(dy_i * y_i). ws as for the forward. */
void dt_attn_backward(const float *restrict qkv, const float *restrict y, const float *restrict lse,
                      const float *restrict dy, int64_t T, int64_t E, int64_t H, int64_t h,
                      float scale, const dt_attn_dropout *drop, float *restrict dqkv,
                      float *restrict ws);

/* One query against n cached keys and values (a generation step with a key-value cache,
 * src/infer/kv_cache.c): q (E) holds every head's query, k and v rows j < n of leading
 * dimension ld (>= E), head h owning columns h D .. h D + D - 1, D = E / H. y (E) = per head
 * softmax_j(scale (q . k_j)) v_j over every j < n, written: row n - 1 of dt_attn_forward's
 * output for the same q, k, v, within float rounding (no dropout: evaluation). n >= 1;
 * ws: n floats. */
void dt_attn_query(const float *restrict q, const float *restrict k, const float *restrict v,
                   int64_t n, int64_t ld, int64_t E, int64_t H, float scale, float *restrict y,
                   float *restrict ws);

#endif
