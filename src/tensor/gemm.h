/* gemm.h — the training step's row-major products with neither operand transposed
 * (internal). No state, no allocation.
 *
 * OpenBLAS's AVX-512 kernel sets (SkylakeX, Cooperlake) compute some such products with a
 * "small matrix" kernel that mallocs a buffer on every call, even on one thread: those whose
 * column count n leaves 1 to 8 columns over a multiple of 16, with k >= 32 and
 * m * n * k <= 100^3. Transposed forms never do (docs/NOTES.md, measured on Debian 12's
 * OpenBLAS 0.3.21). So that the step allocates nothing whichever kernels OpenBLAS picks,
 * every C = A B of the step goes through dt_sgemm_nn, which hands OpenBLAS only whole blocks
 * of 16 columns and computes the rest (fewer than 16) with dt_sgemm_thin, a loop of our own.
 * It splits the same way on every CPU, not only where OpenBLAS would allocate, so the columns
 * OpenBLAS does not see round alike whichever kernels run the others. */
#ifndef DT_TENSOR_GEMM_H
#define DT_TENSOR_GEMM_H

#include <stdint.h>

/* dt_sgemm_nn passes OpenBLAS multiples of DT_GEMM_BLOCK columns; dt_sgemm_thin takes up
 * to DT_GEMM_THIN_MAX. */
enum { DT_GEMM_BLOCK = 16, DT_GEMM_THIN_MAX = DT_GEMM_BLOCK - 1 };

/* c (m, n) = a (m, k) @ b (k, n), row-major with leading dimensions lda >= k, ldb >= n,
 * ldc >= n; m, n, k >= 0 and every size <= INT_MAX (cblas takes int): asserted. c is written
 * without being read (a NaN there does not survive), as sgemm with beta 0 does; it may not
 * overlap a or b. */
void dt_sgemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc);

/* c (m, n) += a (m, k) @ b (k, n), otherwise as dt_sgemm_nn: sgemm with beta 1, which skips
 * the pass OpenBLAS makes to zero c under beta 0 (a layer that starts c from its bias adds
 * the product to it, as torch.addmm does). */
void dt_sgemm_nn_add(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float *c, int64_t ldc);

/* The same for a thin b, 1 <= n <= DT_GEMM_THIN_MAX (asserted), by our own loop: each
 * element is a dot product over k in blocks of 256, each block summed in 4 lanes (p mod 4)
 * added pairwise, then its last k mod 4 terms in order, the blocks added in order; float
 * throughout. A row's bits depend on neither m nor where the row falls in the matrix. 4 rows
 * at a time share each load of b's column. The shapes it gets are small or memory-bound
 * (PowerSGD's P = M Q reads M once): it takes 1-5x OpenBLAS's time on them, microseconds a
 * step (docs/NOTES.md). */
void dt_sgemm_thin(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float *c, int64_t ldc);

#endif
