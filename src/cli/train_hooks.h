/* train_hooks.h — what `dtrain train` does besides training at each step: the progress
 * file a supervisor reads (dtrain launch), the signal that stops the run (--stop-on), and
 * the faults tests inject. */
#ifndef DT_CLI_TRAIN_HOOKS_H
#define DT_CLI_TRAIN_HOOKS_H

#include <stdint.h>

#include "dtrain/train.h"

/* Reads the environment once: DTRAIN_PROGRESS_FILE (rank 0 keeps the optimizer step it has
 * reached in that file, for dtrain launch's report of recomputed steps), and the test-only
 * DTRAIN_TEST_KILL="RANK:STEP[:MARKER]" (that rank SIGKILLs itself once step STEP is taken;
 * with MARKER, only while the file MARKER does not exist, created first, so that it fires
 * once across restarts), DTRAIN_TEST_NAN="RANK:STEP" (a NaN in that rank's loss gradient
 * at the STEP-th step attempted) and DTRAIN_TEST_SIGNAL="RANK:STEP" (that rank raises
 * train.stop_signal's signal once step STEP is taken). A stop signal that came before asks
 * the trainer now. */
void dt_cli_hooks_setup(dt_trainer *t, int rank);
/* With train.stop_signal set, installs its handler, as early as the config is read (MPI,
 * the data and the model take seconds to start, and the signal's default action ends the
 * process): the first such signal asks the trainer to stop (dt_trainer_request_stop), at
 * once or when dt_cli_hooks_setup gives it; a second one acts as without the handler. */
void dt_cli_stop_install(const dt_config *cfg);
/* After each step, on every rank. */
void dt_cli_hooks_step(int rank, int64_t step);
/* Before the trainer is freed: a stop signal from now on asks nothing of it. */
void dt_cli_hooks_close(void);
/* The signal train.stop_signal names ("SIGUSR1"), or NULL for none. */
const char *dt_cli_stop_signal_name(const dt_config *cfg);

#endif
