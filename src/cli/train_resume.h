/* train_resume.h — `dtrain train --resume PATH`: the checkpoint found and loaded, or, when
 * an existing directory holds no complete one, a message saying what it holds before the
 * run starts from the beginning. */
#ifndef DT_CLI_TRAIN_RESUME_H
#define DT_CLI_TRAIN_RESUME_H

#include "dtrain/train.h"

/* Collective (dt_trainer_resume): every rank calls it; rank 0 prints. A path that does not
 * exist fails on every rank, naming it. */
dt_status dt_cli_resume(dt_trainer *t, const char *path, int rank);

#endif
