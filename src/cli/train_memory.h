/* train_memory.h — the line `dtrain train` prints at start-up about a GPT's memory: what
 * the trainer planned beside the design's minimum (train.h, dt_gpt_memory_minimum). */
#ifndef DT_CLI_TRAIN_MEMORY_H
#define DT_CLI_TRAIN_MEMORY_H

#include "dtrain/train.h"

/* For a GPT whose whole model and optimizer this rank holds (one process, or ddp without
 * ZeRO; no tensor or pipeline split and no recompute: what the formula covers), prints its
 * planned memory, the design's minimum for the rank's batch per call and threads, and their
 * ratio. Prints nothing for any other model or layout. */
void dt_cli_print_gpt_memory(const dt_config *cfg, dt_trainer *t);

#endif
