/* alloc_count.h — counts calls to malloc and friends for the whole process (OpenBLAS and
 * MPI included, the latter apart), by replacing them with wrappers around glibc's. Link it only
 * into tests that check "the step allocates nothing"; it cannot run under AddressSanitizer, which
 * replaces malloc itself. */
#ifndef DT_ALLOC_COUNT_H
#define DT_ALLOC_COUNT_H

/* Starts or stops counting; dt_alloc_count_reset() zeroes the counters. dt_alloc_count is
 * every allocation not made by Open MPI's own code (ours, OpenBLAS's, libc's on our
 * behalf); dt_alloc_count_mpi the calls from Open MPI's libraries and plugins, which buffer
 * a message that arrives before its receive is posted in an allocator of their own, as the
 * ranks' timing dictates (tests report those, they cannot require none). */
void dt_alloc_count_enable(int on);
void dt_alloc_count_reset(void);
long dt_alloc_count(void);
long dt_alloc_count_mpi(void);

/* Bytes in flight: the blocks allocated while counting (not by Open MPI) and not yet freed,
 * by the size asked for (realloc moves a block's record), and the most there were at once
 * since the last reset: the peak extra memory of what ran in between (a checkpoint's save,
 * say). Blocks allocated before the reset are not counted when they are freed. Tracks up
 * to DT_ALLOC_TRACK_MAX blocks at once; dt_alloc_count_overflow says whether more were. */
#define DT_ALLOC_TRACK_MAX 65536
long long dt_alloc_count_live_bytes(void);
long long dt_alloc_count_peak_bytes(void);
int dt_alloc_count_overflow(void);

#endif
