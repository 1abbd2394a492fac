/* alloc_count.h — counts calls to malloc and friends for the whole process (OpenBLAS and
 * MPI included), by replacing them with wrappers around glibc's. Link it only into tests
 * that check "the step allocates nothing"; it cannot run under AddressSanitizer, which
 * replaces malloc itself. */
#ifndef DT_ALLOC_COUNT_H
#define DT_ALLOC_COUNT_H

/* Starts or stops counting; dt_alloc_count_reset() zeroes the counter. */
void dt_alloc_count_enable(int on);
void dt_alloc_count_reset(void);
long dt_alloc_count(void);

#endif
