/* train_memory.h — what `dtrain train` prints at start-up about memory: each rank's planned
 * bytes by part, at every layout, and for a GPT whose whole model one rank holds, the plan
 * beside the design's minimum (train.h, dt_gpt_memory_minimum). */
#ifndef DT_CLI_TRAIN_MEMORY_H
#define DT_CLI_TRAIN_MEMORY_H

#include "cli/cli.h"
#include "dtrain/train.h"

/* For a GPT whose whole model and optimizer this rank holds (one process, or ddp without
 * ZeRO; no tensor or pipeline split and no recompute: what the formula covers), prints its
 * planned memory, the design's minimum for the rank's batch per call and threads, and their
 * ratio. Prints nothing for any other model or layout. */
void dt_cli_print_gpt_memory(const dt_config *cfg, dt_trainer *t);

/* Every rank's planned memory, a line per rank printed by rank 0 in rank order ("dtrain:
 * memory planned on rank R (dp d, tp t, pp p): ..."; one process: "on rank 0"): parameters,
 * gradients, optimizer state (ZeRO-1: the rank's slice), activations and workspaces, of
 * them the activations kept from forward to backward and the transformer blocks'
 * per-position part (dt_model_memory), and their sum (dt_trainer_planned_bytes). For every
 * model and layout. Collective over the world. */
dt_status dt_cli_print_rank_memory(const dt_config *cfg, const dt_cli_world *w, dt_trainer *t);

#endif
