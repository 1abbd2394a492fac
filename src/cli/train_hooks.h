/* train_hooks.h — what `dtrain train` does besides training at each step: the progress
 * file a supervisor reads (dtrain launch), and the faults tests inject. */
#ifndef DT_CLI_TRAIN_HOOKS_H
#define DT_CLI_TRAIN_HOOKS_H

#include <stdint.h>

#include "dtrain/train.h"

/* Reads the environment once: DTRAIN_PROGRESS_FILE (rank 0 keeps the optimizer step it has
 * reached in that file, for dtrain launch's report of recomputed steps), and the test-only
 * DTRAIN_TEST_KILL="RANK:STEP[:MARKER]" (that rank SIGKILLs itself once step STEP is taken;
 * with MARKER, only while the file MARKER does not exist, created first, so that it fires
 * once across restarts) and DTRAIN_TEST_NAN="RANK:STEP" (a NaN in that rank's loss gradient
 * at the STEP-th step attempted). */
void dt_cli_hooks_setup(dt_trainer *t, int rank);
/* After each step, on every rank. */
void dt_cli_hooks_step(int rank, int64_t step);

#endif
